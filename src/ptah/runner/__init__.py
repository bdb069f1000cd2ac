"""The in-Pod entrypoint and the result frame. Never imports the operator."""
