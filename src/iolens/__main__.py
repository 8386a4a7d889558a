from iolens.present.cli.main import main

main()
