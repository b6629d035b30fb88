"""Training plugins: likelihood estimators, algorithms, the local trainer and the CLI of dare-train."""
