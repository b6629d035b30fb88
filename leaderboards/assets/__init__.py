"""The leaderboard page: index.html, style.css and the scripts, shipped as package data."""
