from costmodel.cli import main

main()
