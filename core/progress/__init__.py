"""Progress events: publishing to the project's Channels group and Redis pub/sub, the websocket
consumer and its route."""
