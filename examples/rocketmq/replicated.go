package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/replicated"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// raftFlags are the flags of a replicated node (package replicated).
type raftFlags struct {
	id, addr, peers string
	bootstrap       bool
	secretFile      string
}

// replicatedFlags adds -raft-id, -raft-addr, -peers and -bootstrap: with
// -raft-id the program runs as one node of a raft cluster.
func replicatedFlags(fs *flag.FlagSet) *raftFlags {
	rf := &raftFlags{}
	fs.StringVar(&rf.id, "raft-id", "", "run as this node of a replicated cluster (raft server id; empty = a single broker)")
	fs.StringVar(&rf.addr, "raft-addr", "127.0.0.1:7001", "raft listen and advertised address of a replicated node")
	fs.StringVar(&rf.peers, "peers", "", "the cluster's initial voters, this node among them: id=raftAddr[@brokerAddr[@grpcAddr]],…")
	fs.BoolVar(&rf.bootstrap, "bootstrap", false, "start a new cluster from -peers (give every initial node the same -peers and -bootstrap; ignored once the node has raft state)")
	fs.StringVar(&rf.secretFile, "cluster-secret-file", "", "file holding the cluster's shared secret (at least 16 bytes, the same on every node): raft connections must prove it; -acl needs it")
	return rf
}

// runReplicated runs a replicated node until ctx is done. The gRPC
// endpoint is served (-grpc-addr; "-" = off), and gRPC routes name every
// peer's grpcAddr; so is the metrics and admin HTTP endpoint
// (-metrics-addr; "-" = off): the node's own metrics and replicated
// offsets, and offset resets through raft on the leader (a follower
// refuses them, naming the leader).
//
// -cluster-secret-file authenticates the raft port; -acl (the same file
// on every node; SIGHUP reloads this node's only) needs it. As for a single
// broker, the client listeners must be loopback ones without -acl, and the
// raft address without a secret, unless -insecure-allow-remote.
func runReplicated(ctx context.Context, cfg server.Config, rf *raftFlags, log *slog.Logger) int {
	peers, err := replicated.ParsePeers(rf.peers)
	if err != nil {
		log.Error("bad -peers", "err", err)
		return 2
	}
	var secret []byte
	if rf.secretFile != "" {
		if secret, err = replica.LoadSecret(rf.secretFile); err != nil {
			log.Error("bad -cluster-secret-file", "err", err)
			return 2
		}
	}
	if cfg.ACL != nil && secret == nil {
		log.Error("-acl with -raft-id needs -cluster-secret-file (raft and the forwarded requests are authenticated with it)")
		return 2
	}
	grpcAddr, httpAddr := cfg.GRPCAddr, cfg.MetricsAddr
	if grpcAddr == "-" {
		grpcAddr = ""
	}
	if httpAddr == "-" {
		httpAddr = ""
	}
	if !cfg.InsecureAllowRemote {
		addrs := map[string]string{}
		if cfg.ACL == nil {
			addrs["broker"], addrs["name server"] = cfg.BrokerAddr, cfg.NameSrvAddr
			if grpcAddr != "" {
				addrs["grpc"] = grpcAddr
			}
			if httpAddr != "" {
				addrs["metrics/admin"] = httpAddr
			}
		}
		if secret == nil && !server.Loopback(rf.addr) {
			log.Error("start", "err", fmt.Errorf("raft address %s: %w (-cluster-secret-file, or -insecure-allow-remote)", rf.addr, replica.ErrInsecureRaft))
			return 1
		}
		for what, a := range addrs {
			if !server.Loopback(a) {
				log.Error("start", "err", fmt.Errorf("%w: %s address %s", server.ErrInsecureListen, what, a))
				return 1
			}
		}
	}
	s, err := replicated.Start(replicated.Config{Dir: cfg.Dir, NameSrvAddr: cfg.NameSrvAddr, BrokerAddr: cfg.BrokerAddr, GRPCAddr: grpcAddr,
		ID: rf.id, RaftAddr: rf.addr, Peers: peers, Bootstrap: rf.bootstrap, QueueNums: cfg.QueueNums,
		LockMaxLiveTime: cfg.LockMaxLiveTime, Logger: log,
		ClusterSecret: secret, InsecureRaft: cfg.InsecureAllowRemote, ACL: cfg.ACL, ACLFile: cfg.ACLFile,
		MetricsAddr: httpAddr, PublicMetrics: cfg.PublicMetrics})
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
