from iolens.present.cli.entry import main

main()
