from hdtwd_cli.cli._app import main

main()
