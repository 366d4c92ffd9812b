"""memkeeper as an MCP server.

The memory tools over stdio and streamable HTTP, with authentication.
"""
