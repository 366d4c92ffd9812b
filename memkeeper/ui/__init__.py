"""``memkeeper ui``: a local web page of what the memory holds and what maintenance did to it.

Server-rendered pages over the same library as the CLI and the MCP server (a thin layer:
each view reads or changes the memory through one library call, as its CLI twin does):
the overview (:mod:`~memkeeper.ui.pages_overview`), runs and undo
(:mod:`~memkeeper.ui.pages_runs`), users, memories and search
(:mod:`~memkeeper.ui.pages_memories`), review and forget (:mod:`~memkeeper.ui.pages_actions`).
Who may see and do what is :mod:`~memkeeper.ui.security`'s; the app and its server are
:mod:`~memkeeper.ui.app`'s. Starlette and uvicorn load only when a server is built.
"""
