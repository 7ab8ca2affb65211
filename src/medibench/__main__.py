from medibench.cli import main

main()
