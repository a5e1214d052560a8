"""The installers that fill a staging dir (pip, uv) and the runner that starts and stops them."""
