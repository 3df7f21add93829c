"""What the benchmark reports: `compare` (one request as a value, the rows run side by side, the plan of what
they cost), the leaderboards rendered from its records with their contrasts, power and further metrics, the CI
regression check and its reports, the figures, and the README's tables. Above training and evaluation, whose
records and runs it reads; below the analyses and the command line."""
