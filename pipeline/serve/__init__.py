"""The HTTP service and the MCP server over one engine per knowledge base (``specrag serve``,
``specrag mcp``)."""
