from jsbench.cli import main

main()
