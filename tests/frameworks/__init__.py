"""Seven frameworks nobody on this project wrote, driven as their users drive them."""
