package main

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

func init() {
	commands["clusterList"] = command{"List cluster infos.", clusterList}
	commands["brokerStatus"] = command{"Fetch broker runtime status data.", brokerStatus}
}

func sortStrings(s []string) { sort.Strings(s) }

// versionDesc is Apache's MQVersion.getVersionDesc for the versions a
// client reports (V5_x_y from its ordinal), or the number.
func versionDesc(v int) string {
	if v <= 0 {
		return strconv.Itoa(v)
	}
	return "V" + strconv.Itoa(v)
}

// runtimeInfo is a broker's GET_BROKER_RUNTIME_INFO table.
func (e *env) runtimeInfo(addr string) (map[string]string, error) {
	resp, err := e.cli.invoke(addr, codeGetBrokerRuntimeInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	var kv struct {
		Table map[string]string `json:"table"`
	}
	if err := decodeJSON(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("runtime info of %s: %w", addr, err)
	}
	return kv.Table, nil
}

func clusterList(fs *flag.FlagSet) func(*env) error {
	only := fs.String("c", "", "which cluster")
	return func(e *env) error {
		ci, err := e.clusterInfo()
		if err != nil {
			return err
		}
		clusters := make([]string, 0, len(ci.ClusterAddrTable))
		for c := range ci.ClusterAddrTable {
			if *only == "" || c == *only {
				clusters = append(clusters, c)
			}
		}
		sort.Strings(clusters)
		fmt.Fprintf(e.out, "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s\n",
			"#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
		for _, c := range clusters {
			names := append([]string(nil), ci.ClusterAddrTable[c]...)
			sort.Strings(names)
			for _, n := range names {
				bd, ok := ci.BrokerAddrTable[n]
				if !ok {
					continue
				}
				ids := make([]string, 0, len(bd.BrokerAddrs))
				for id := range bd.BrokerAddrs {
					ids = append(ids, id)
				}
				sort.Strings(ids)
				for _, id := range ids {
					addr := bd.BrokerAddrs[id]
					kv, err := e.runtimeInfo(addr)
					if err != nil {
						fmt.Fprintf(e.errOut, "%v\n", err)
						kv = map[string]string{}
					}
					fmt.Fprintln(e.out, clusterRow(c, n, id, addr, kv, time.Now()))
				}
			}
		}
		return nil
	}
}

// clusterRow is one line of clusterList, from a broker's runtime table,
// exactly as ClusterListSubCommand computes it.
func clusterRow(cluster, name, id, addr string, kv map[string]string, now time.Time) string {
	first := func(k string) float64 {
		f, _ := strconv.ParseFloat(strings.SplitN(kv[k], " ", 2)[0], 64)
		return f
	}
	or := func(k, d string) string {
		if v, ok := kv[k]; ok {
			return v
		}
		return d
	}
	num := func(k string) float64 { f, _ := strconv.ParseFloat(kv[k], 64); return f }
	hour := 0.0
	if ms, err := strconv.ParseInt(kv["earliestMessageTimeStamp"], 10, 64); err == nil {
		hour = float64(now.UnixMilli()-ms) / 1000 / 60 / 60
	}
	active, _ := strconv.ParseBool(kv["brokerActive"])
	return fmt.Sprintf("%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10t",
		cluster, name, id, addr, kv["brokerVersionDesc"],
		fmt.Sprintf("%9.2f(%s,%sms)", first("putTps"), kv["sendThreadPoolQueueSize"], kv["sendThreadPoolQueueHeadWaitTimeMills"]),
		fmt.Sprintf("%9.2f(%s,%sms|%s,%sms)", first("getTransferredTps"), kv["pullThreadPoolQueueSize"], kv["pullThreadPoolQueueHeadWaitTimeMills"],
			or("ackThreadPoolQueueSize", "N"), or("ackThreadPoolQueueHeadWaitTimeMills", "N")),
		fmt.Sprintf("%d-%d(%.1fw, %.1f, %.1f)", int64(num("timerReadBehind")), int64(num("timerOffsetBehind")), num("timerCongestNum")/10000, num("timerEnqueueTps"), num("timerDequeueTps")),
		kv["pageCacheLockTimeMills"], fmt.Sprintf("%2.2f", hour), fmt.Sprintf("%.4f", num("commitLogDiskRatio")), active)
}

func brokerStatus(fs *flag.FlagSet) func(*env) error {
	broker := fs.String("b", "", "Broker address")
	cluster := fs.String("c", "", "which cluster")
	return func(e *env) error {
		addrs, err := e.targets(*broker, *cluster)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			kv, err := e.runtimeInfo(a)
			if err != nil {
				return err
			}
			keys := make([]string, 0, len(kv))
			for k := range kv {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if *cluster != "" {
					fmt.Fprintf(e.out, "%-24s %-32s: %s\n", a, k, kv[k])
				} else {
					fmt.Fprintf(e.out, "%-32s: %s\n", k, kv[k])
				}
			}
		}
		return nil
	}
}
