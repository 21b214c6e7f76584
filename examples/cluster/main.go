// Command cluster runs brokercore brokers replicated with hashicorp/raft.
package main

import "os"

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int { return 0 }
