"""Layer 6: suites built on runs and results: risk and safety attacks (XPIA, UPIA jailbreaks) and WildBench
(published judgment files, leaderboards)."""
