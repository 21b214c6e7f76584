package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/brokercore/brokercore/examples/rocketmq/replicated"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// raftFlags are the flags of a replicated node (package replicated).
type raftFlags struct {
	id, addr, peers string
	bootstrap       bool
}

// replicatedFlags adds -raft-id, -raft-addr, -peers and -bootstrap: with
// -raft-id the program runs as one node of a raft cluster.
func replicatedFlags(fs *flag.FlagSet) *raftFlags {
	rf := &raftFlags{}
	fs.StringVar(&rf.id, "raft-id", "", "run as this node of a replicated cluster (raft server id; empty = a single broker)")
	fs.StringVar(&rf.addr, "raft-addr", "127.0.0.1:7001", "raft listen and advertised address of a replicated node")
	fs.StringVar(&rf.peers, "peers", "", "the cluster's initial voters, this node among them: id=raftAddr[@brokerAddr[@grpcAddr]],…")
	fs.BoolVar(&rf.bootstrap, "bootstrap", false, "start a new cluster from -peers (give every initial node the same -peers and -bootstrap; ignored once the node has raft state)")
	return rf
}

// runReplicated runs a replicated node until ctx is done. The metrics and
// admin HTTP endpoint is not served in this mode; the gRPC endpoint is
// (-grpc-addr; "-" = off), and gRPC routes name every peer's grpcAddr.
//
// ACL is not available in this mode yet (a follower forwards sends to the
// leader, and raft's own traffic is not authenticated), so -acl is refused
// and, as for a single broker without ACL, every listen address must be a
// loopback one unless -insecure-allow-remote says otherwise.
func runReplicated(ctx context.Context, cfg server.Config, rf *raftFlags, log *slog.Logger) int {
	peers, err := replicated.ParsePeers(rf.peers)
	if err != nil {
		log.Error("bad -peers", "err", err)
		return 2
	}
	if cfg.ACL != nil {
		log.Error("-acl is not supported with -raft-id yet")
		return 2
	}
	grpcAddr := cfg.GRPCAddr
	if grpcAddr == "-" {
		grpcAddr = ""
	}
	if !cfg.InsecureAllowRemote {
		addrs := map[string]string{"broker": cfg.BrokerAddr, "name server": cfg.NameSrvAddr, "raft": rf.addr}
		if grpcAddr != "" {
			addrs["grpc"] = grpcAddr
		}
		for what, a := range addrs {
			if !loopbackAddr(a) {
				log.Error("start", "err", fmt.Errorf("%w: %s address %s", server.ErrInsecureListen, what, a))
				return 1
			}
		}
	}
	s, err := replicated.Start(replicated.Config{Dir: cfg.Dir, NameSrvAddr: cfg.NameSrvAddr, BrokerAddr: cfg.BrokerAddr, GRPCAddr: grpcAddr,
		ID: rf.id, RaftAddr: rf.addr, Peers: peers, Bootstrap: rf.bootstrap, QueueNums: cfg.QueueNums,
		LockMaxLiveTime: cfg.LockMaxLiveTime, Logger: log})
	if err != nil {
		log.Error("start", "err", err)
		return 1
	}
	<-ctx.Done()
	log.Info("shutting down")
	if err := s.Close(); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// loopbackAddr reports whether a listen address binds loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
