from ._cli.app import main

main()
