from costmodel.cli import run

run()
