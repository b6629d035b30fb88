"""The static HTML leaderboard: reads run records only, never a model."""
