"""The schedule policy: the networks that map a prompt and the initial noise to a schedule (the Dirichlet
policy in schedule_policy.py, its noise encoders, the cross-attention and TPDM networks, the size at full scale),
their files on disk, and the held-out convergence verdict of a training run's folder. Above the suites and
below the zoo (the zoo's `policy:PATH` source loads one); imports no evaluation or training."""
