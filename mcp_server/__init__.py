"""The platform as a Model Context Protocol server: tools and resources over the REST API's own views."""
