"""File-system utilities every layer uses: atomic writes, the exclusive file lock, the home folder."""
