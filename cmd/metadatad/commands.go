package main

import (
	"context"
	"io"
	"os"
)

// commands are metadatad's subcommands, `metadatad NAME -flags`; without
// one, metadatad serves.
var commands = map[string]func(ctx context.Context, args []string, out io.Writer) error{
	"backup":  runBackup,
	"restore": runRestore,
	"copy":    runCopy,
	"compact": runCompact,
}

// runCommand runs the subcommand args names, if it names one.
func runCommand(args []string) (ran bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	command, ok := commands[args[0]]
	if !ok {
		return false, nil
	}
	return true, command(context.Background(), args[1:], os.Stdout)
}
