// Command cdcctl is the operator CLI of healthlake-cdc: inspect export files,
// show the run status, replay a period, release a stale lock, start a run,
// list or redrive dead-letter queues, list quarantined records, check a data
// store before a deploy.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit codes shared by every subcommand.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitQuarantined = 3
)

// command is one cdcctl subcommand. run gets the arguments after the
// subcommand's name and returns the process exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands is filled by the init functions of the subcommand files.
var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args = hoistGlobalFlags(args)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return exitUsage
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "cdcctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	if args[0] != "inspect" {
		restore := applyLocalDefaults(ctx, args[1:])
		defer restore()
	}
	return c.run(ctx, args[1:], stdin, stdout, stderr)
}

// Global flags cdcctl accepts before the command name as well as after it,
// as aws and kubectl do: those of awsFlags.
var (
	globalValueFlags = map[string]bool{"endpoint": true, "region": true, "table": true, "state-machine-arn": true}
	globalBoolFlags  = map[string]bool{"json": true}
)

// hoistGlobalFlags moves global flags given before the command name to just
// after it ("--region r status" becomes "status --region r"), where the
// command's flag set parses them. Anything else before the command is left
// as it is.
func hoistGlobalFlags(args []string) []string {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch {
		case globalBoolFlags[name], globalValueFlags[name] && hasValue:
			i++
		case globalValueFlags[name] && i+1 < len(args):
			i += 2
		default:
			return args
		}
	}
	if i == 0 || i >= len(args) {
		return args
	}
	out := make([]string, 0, len(args))
	out = append(out, args[i])
	out = append(out, args[:i]...)
	return append(out, args[i+1:]...)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cdcctl [global flags] COMMAND [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'cdcctl COMMAND -h' for the flags of a command. The global flags --endpoint,")
	fmt.Fprintln(w, "--region, --table, --state-machine-arn and --json go before or after COMMAND.")
}
