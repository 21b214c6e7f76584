package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/meta"
)

// Apache's PermName bits.
const (
	permRead  = 4
	permWrite = 2
)

func init() {
	commands["updateTopic"] = command{"Update or create topic.", updateTopic}
	commands["deleteTopic"] = command{"Delete topic from broker and NameServer.", deleteTopic}
	commands["topicList"] = command{"Fetch all topic list from name server.", topicList}
	commands["topicRoute"] = command{"Examine topic route info.", topicRoute}
	commands["topicStatus"] = command{"Examine topic Status info.", topicStatus}
}

// parseAttributes is Apache's AttributeParser.parseToMap: "+a=b,+c=d,-e".
func parseAttributes(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if len(kv) < 2 || (kv[0] != '+' && kv[0] != '-') {
			return nil, usage("attribute %q: want +key=value or -key", kv)
		}
		k, v, hasV := strings.Cut(kv, "=")
		switch {
		case kv[0] == '+' && (!hasV || v == ""):
			return nil, usage("attribute %q: +key needs =value", kv)
		case kv[0] == '-' && hasV:
			return nil, usage("attribute %q: -key takes no value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// attributesString is Apache's AttributeParser.parseToString (sorted).
func attributesString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k
		if m[k] != "" {
			parts[i] += "=" + m[k]
		}
	}
	return strings.Join(parts, ",")
}

// permString is Apache's PermName.perm2String.
func permString(p int) string {
	b := []byte("---")
	if p&permRead != 0 {
		b[0] = 'R'
	}
	if p&permWrite != 0 {
		b[1] = 'W'
	}
	if p&1 != 0 {
		b[2] = 'X'
	}
	return string(b)
}

func updateTopic(fs *flag.FlagSet) func(*env) error {
	broker := fs.String("b", "", "create topic to which broker")
	cluster := fs.String("c", "", "create topic to which cluster")
	attrs := fs.String("a", "", "attribute(+a=b,+c=d,-e)")
	topic := fs.String("t", "", "topic name")
	r := fs.Int("r", 8, "set read queue nums")
	w := fs.Int("w", 8, "set write queue nums")
	perm := fs.Int("p", permRead|permWrite, "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]")
	order := boolArg(fs, "o", false, "set topic's order(true|false)")
	return func(e *env) error {
		t := strings.TrimSpace(*topic)
		if t == "" {
			return usage("-t topic is required")
		}
		am, err := parseAttributes(*attrs)
		if err != nil {
			return err
		}
		addrs, err := e.targets(*broker, *cluster)
		if err != nil {
			return err
		}
		ext := map[string]string{
			"topic": t, "defaultTopic": "TBW102", "readQueueNums": strconv.Itoa(*r), "writeQueueNums": strconv.Itoa(*w),
			"perm": strconv.Itoa(*perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": strconv.FormatBool(*order),
		}
		if len(am) > 0 {
			ext["attributes"] = attributesString(am)
		}
		for _, a := range addrs {
			if _, err := e.cli.invoke(a, codeUpdateAndCreateTopic, ext, nil); err != nil {
				return err
			}
			fmt.Fprintf(e.out, "create topic to %s success.\n", a)
		}
		fmt.Fprintf(e.out, "TopicConfig [topicName=%s, readQueueNums=%d, writeQueueNums=%d, perm=%s, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=%t, attributes=%s]\n",
			t, *r, *w, permString(*perm), *order, javaMap(am))
		return nil
	}
}

func deleteTopic(fs *flag.FlagSet) func(*env) error {
	topic := fs.String("t", "", "topic name")
	cluster := fs.String("c", "", "delete topic from which cluster")
	return func(e *env) error {
		t := strings.TrimSpace(*topic)
		if t == "" || *cluster == "" {
			return usage("-t topic and -c clusterName are required")
		}
		addrs, err := e.masters(*cluster)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if _, err := e.cli.invoke(a, codeDeleteTopicInBroker, map[string]string{"topic": t}, nil); err != nil {
				return err
			}
		}
		fmt.Fprintf(e.out, "delete topic [%s] from cluster [%s] success.\n", t, *cluster)
		if _, err := e.cli.invoke(e.ns, codeDeleteTopicInNamesrv, map[string]string{"topic": t, "clusterName": *cluster}, nil); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "delete topic [%s] from NameServer success.\n", t)
		return nil
	}
}

func topicList(fs *flag.FlagSet) func(*env) error {
	clusterMode := fs.Bool("c", false, "clusterModel")
	return func(e *env) error {
		ns, err := e.needNS()
		if err != nil {
			return err
		}
		resp, err := e.cli.invoke(ns, codeGetAllTopicListFromNS, nil, nil)
		if err != nil {
			return err
		}
		var tl struct {
			TopicList []string `json:"topicList"`
		}
		if err := decodeJSON(resp.Body, &tl); err != nil {
			return fmt.Errorf("topic list: %w", err)
		}
		if !*clusterMode {
			for _, t := range tl.TopicList {
				fmt.Fprintf(e.out, "%s\n", t)
			}
			return nil
		}
		ci, err := e.clusterInfo()
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "%-20s  %-48s  %-48s\n", "#Cluster Name", "#Topic", "#Consumer Group")
		for _, t := range tl.TopicList {
			if strings.HasPrefix(t, retryPrefix) || strings.HasPrefix(t, "%DLQ%") {
				continue
			}
			cluster := ""
			if rd, err := e.route(t); err == nil && len(rd.BrokerDatas) > 0 {
				for c, names := range ci.ClusterAddrTable {
					for _, n := range names {
						if n == rd.BrokerDatas[0].BrokerName {
							cluster = c
						}
					}
				}
			}
			fmt.Fprintf(e.out, "%-20s  %-64s  %-64s\n", frontStringAtLeast(cluster, 20), frontStringAtLeast(t, 64), "")
		}
		return nil
	}
}

// routeFormat is TopicRouteSubCommand's list format.
const routeFormat = "%-45s %-32s %-50s %-10s %-11s %-5s\n"

func topicRoute(fs *flag.FlagSet) func(*env) error {
	topic := fs.String("t", "", "topic name")
	list := fs.Bool("l", false, "Use list format to print data")
	return func(e *env) error {
		t := strings.TrimSpace(*topic)
		if t == "" {
			return usage("-t topic is required")
		}
		rd, err := e.route(t)
		if err != nil {
			return err
		}
		if !*list {
			raw, _ := json.Marshal(rd)
			var b bytes.Buffer
			_ = json.Indent(&b, raw, "", "\t")
			fmt.Fprintf(e.out, "%s\n", b.String())
			return nil
		}
		byName := map[string]queueData{}
		for _, q := range rd.QueueDatas {
			byName[q.BrokerName] = q
		}
		bds := append([]brokerData(nil), rd.BrokerDatas...)
		sort.Slice(bds, func(i, j int) bool { return bds[i].BrokerName < bds[j].BrokerName })
		fmt.Fprintf(e.out, routeFormat, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
		totalR, totalW := 0, 0
		for _, bd := range bds {
			q := byName[bd.BrokerName]
			totalR += q.ReadQueueNums
			totalW += q.WriteQueueNums
			fmt.Fprintf(e.out, routeFormat, bd.Cluster, bd.BrokerName, javaMap(bd.BrokerAddrs), strconv.Itoa(q.ReadQueueNums), strconv.Itoa(q.WriteQueueNums), strconv.Itoa(q.Perm))
		}
		fmt.Fprintf(e.out, "%s\n", strings.Repeat("-", 158))
		fmt.Fprintf(e.out, routeFormat, "Total:", strconv.Itoa(len(byName)), "", strconv.Itoa(totalR), strconv.Itoa(totalW), "")
		return nil
	}
}

type topicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// humanTime is Apache's UtilAll.timeMillisToHumanString2.
func humanTime(ms int64) string {
	return time.UnixMilli(ms).Format("2006-01-02 15:04:05,000")
}

func topicStatus(fs *flag.FlagSet) func(*env) error {
	topic := fs.String("t", "", "topic name")
	return func(e *env) error {
		t := strings.TrimSpace(*topic)
		if t == "" {
			return usage("-t topic is required")
		}
		rd, err := e.route(t)
		if err != nil {
			return err
		}
		addrs, _ := routeMasters(rd)
		merged := map[string]topicOffset{}
		var tps float64
		for _, a := range addrs {
			resp, err := e.cli.invoke(a, codeGetTopicStatsInfo, map[string]string{"topic": t}, nil)
			if err != nil {
				return err
			}
			var st struct {
				OffsetTable map[string]topicOffset `json:"offsetTable"`
				TopicPutTps float64                `json:"topicPutTps"`
			}
			if err := decodeJSON(resp.Body, &st); err != nil {
				return fmt.Errorf("topic stats from %s: %w", a, err)
			}
			for k, v := range st.OffsetTable {
				merged[k] = v
			}
			tps += st.TopicPutTps
		}
		keys, table, err := mqTable(merged)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "%-32s  %-4s  %-20s  %-20s    %s\n", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
		for _, mq := range keys {
			o := table[mq]
			human := ""
			if o.LastUpdateTimestamp > 0 {
				human = humanTime(o.LastUpdateTimestamp)
			}
			fmt.Fprintf(e.out, "%-32s  %-4d  %-20d  %-20d    %s\n", frontStringAtLeast(mq.BrokerName, 32), mq.QueueID, o.MinOffset, o.MaxOffset, human)
		}
		fmt.Fprintf(e.out, "\nTopic Put TPS: %s\n", meta.JavaDouble(tps))
		return nil
	}
}
