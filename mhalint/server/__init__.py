"""`mhalint server`: mhalint's findings in the editor, as you type, over the Language Server Protocol.

It needs the `server` extra (pygls and lsprotocol), which the linter itself does not: `pip install -e
'.[server]'`. The modules: `session` (the warm state and the checks, no protocol), `scheduler` (when a document is
checked), `app` (the protocol), and the conversions to LSP's shapes (`convert`, `diagnostics`, `actions`, `hover`,
`rule_docs`, `options`).
"""
