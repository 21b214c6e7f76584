// Command mqadmin is a Go mqadmin: the subcommands of Apache RocketMQ's
// admin tool that people type daily, with Apache's names, flags and output
// columns, over the remoting protocol only (the name server, then the
// brokers it names), so it talks to this example's broker and to Apache's
// alike.
//
//	go run ./cmd/mqadmin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t orders -r 2 -w 2 -a +message.type=FIFO
//	go run ./cmd/mqadmin updateSubGroup -n 127.0.0.1:9876 -c DefaultCluster -g billing -o true
//	go run ./cmd/mqadmin topicList -n 127.0.0.1:9876
//
// Subcommands: updateTopic, deleteTopic, topicList, topicRoute,
// topicStatus, updateSubGroup, deleteSubGroup, consumerProgress,
// consumerConnection, resetOffsetByTime, queryMsgByKey, queryMsgById,
// clusterList, brokerStatus, and Apache 5.3's createUser, updateUser,
// deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl,
// listAcl. -n is the name server (or $NAMESRV_ADDR); -ak and -sk sign the
// requests for a broker with ACL (or $ROCKETMQ_ACCESS_KEY and
// $ROCKETMQ_SECRET_KEY; Apache's tool reads conf/tools.yml).
//
// Exit codes, unlike Apache's tool (which exits 0 after printing a stack
// trace): 0 done, 1 the request failed (the server's code and remark are
// printed), 2 bad usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errUsage is bad command-line input.
var errUsage = errors.New("usage")

// env is what a subcommand runs with.
type env struct {
	out, errOut io.Writer
	ns          string
	cli         *client
}

// command is one subcommand: its flags and what it does.
type command struct {
	desc  string
	flags func(fs *flag.FlagSet) func(e *env) error
}

var commands = map[string]command{}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the program: it returns the exit code.
func run(args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 2 {
			if _, ok := commands[args[1]]; ok {
				return run([]string{args[1], "-h"}, out, errOut)
			}
		}
		printHelp(out)
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "The sub command %s not exist.\n", args[0])
		return exitUsage
	}
	fs := flag.NewFlagSet("mqadmin "+args[0], flag.ContinueOnError)
	fs.SetOutput(errOut)
	e := &env{out: out, errOut: errOut, cli: &client{timeout: defaultTimeout}}
	fs.StringVar(&e.ns, "n", os.Getenv("NAMESRV_ADDR"), "name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'")
	fs.StringVar(&e.cli.accessKey, "ak", os.Getenv("ROCKETMQ_ACCESS_KEY"), "ACL access key the requests are signed with (or $ROCKETMQ_ACCESS_KEY)")
	fs.StringVar(&e.cli.secretKey, "sk", os.Getenv("ROCKETMQ_SECRET_KEY"), "ACL secret key (or $ROCKETMQ_SECRET_KEY)")
	exec := cmd.flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errOut, "mqadmin %s: unexpected arguments %q\n", args[0], fs.Args())
		return exitUsage
	}
	if i := strings.IndexByte(e.ns, ';'); i >= 0 {
		e.ns = e.ns[:i] // the first name server answers for all
	}
	if err := exec(e); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(errOut, "mqadmin %s: %v\n", args[0], err)
			fs.Usage()
			return exitUsage
		}
		fmt.Fprintf(errOut, "mqadmin %s command failed: %v\n", args[0], err)
		return exitFail
	}
	return exitOK
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "usage: mqadmin <command> [-n namesrv] [args]")
	fmt.Fprintln(w, "The most commonly used mqadmin commands are:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "   %-25s %s\n", n, commands[n].desc)
	}
	fmt.Fprintln(w, "See 'mqadmin help <command>' for more information on a specific command.")
}

// usage is a usage error with a message.
func usage(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// needNS is the name server, or a usage error.
func (e *env) needNS() (string, error) {
	if e.ns == "" {
		return "", usage("no name server: give -n or set NAMESRV_ADDR")
	}
	return e.ns, nil
}

// argBool is a boolean option that takes its value as the next argument
// ("-o true"), as Apache's options with an argument do; Go's flag.Bool
// would leave "true" behind.
type argBool bool

func (b *argBool) String() string { return strconv.FormatBool(bool(*b)) }

func (b *argBool) Set(s string) error {
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*b = argBool(v)
	return nil
}

// boolArg defines an argBool option.
func boolArg(fs *flag.FlagSet, name string, value bool, usage string) *bool {
	b := argBool(value)
	fs.Var(&b, name, usage)
	return (*bool)(&b)
}
