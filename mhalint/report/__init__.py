"""Output formats: one module per format, each a `render(findings, files_checked, hidden, threshold)`."""
