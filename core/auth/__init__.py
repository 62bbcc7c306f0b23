"""Authentication and secrets: API keys and scopes, websocket authentication, generated secrets, key
signals."""
