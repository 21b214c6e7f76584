package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/meta"
)

func init() {
	commands["updateSubGroup"] = command{"Update or create subscription group.", updateSubGroup}
	commands["deleteSubGroup"] = command{"Delete subscription group from broker.", deleteSubGroup}
	commands["consumerProgress"] = command{"Query consumer's progress, speed.", consumerProgress}
	commands["consumerConnection"] = command{"Query consumer's socket connection, client version and subscription.", consumerConnection}
	commands["resetOffsetByTime"] = command{"Reset consumer offset by timestamp(without client restart).", resetOffsetByTime}
}

// subGroupConfig is Apache's SubscriptionGroupConfig as the broker reads it
// (meta.Group's JSON spelling), printed as Apache's mqadmin prints it.
type subGroupConfig meta.Group

func (c subGroupConfig) String() string {
	return fmt.Sprintf("SubscriptionGroupConfig [groupName=%s, consumeEnable=%t, consumeFromMinEnable=%t, consumeBroadcastEnable=%t, consumeMessageOrderly=%t, retryQueueNums=%d, retryMaxTimes=%d, brokerId=%d, whichBrokerWhenConsumeSlowly=%d, notifyConsumerIdsChangedEnable=%t, groupSysFlag=%d, consumeTimeoutMinute=%d, attributes=%s]",
		c.GroupName, c.ConsumeEnable, c.ConsumeFromMinEnable, c.ConsumeBroadcastEnable, c.ConsumeMessageOrderly, c.RetryQueueNums, c.RetryMaxTimes,
		c.BrokerID, c.WhichBrokerWhenConsumeSlowly, c.NotifyConsumerIdsChangedEnable, c.GroupSysFlag, c.ConsumeTimeoutMinute, javaMap(c.Attributes))
}

func updateSubGroup(fs *flag.FlagSet) func(*env) error {
	broker := fs.String("b", "", "create subscription group to which broker")
	cluster := fs.String("c", "", "create subscription group to which cluster")
	group := fs.String("g", "", "consumer group name")
	enable := boolArg(fs, "s", true, "consume enable")
	fromMin := boolArg(fs, "m", false, "from min offset")
	broadcast := boolArg(fs, "d", false, "broadcast")
	orderly := boolArg(fs, "o", false, "consume message orderly")
	retryQ := fs.Int("q", 1, "retry queue nums")
	retryMax := fs.Int("r", 16, "retry max times")
	policy := fs.String("p", "", `the consumer's retry policy, eg: {"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}}`)
	brokerID := fs.Int64("i", 0, "consumer from which broker id")
	slowly := fs.Int64("w", 1, "which broker id when consume slowly")
	notify := boolArg(fs, "a", true, "notify consumerId changed")
	attrs := fs.String("attributes", "", "attribute(+a=b,+c=d,-e)")
	return func(e *env) error {
		g := strings.TrimSpace(*group)
		if g == "" {
			return usage("-g groupName is required")
		}
		am, err := parseAttributes(*attrs)
		if err != nil {
			return err
		}
		cfg := subGroupConfig{GroupName: g, ConsumeEnable: *enable, ConsumeFromMinEnable: *fromMin, ConsumeBroadcastEnable: *broadcast,
			ConsumeMessageOrderly: *orderly, RetryQueueNums: *retryQ, RetryMaxTimes: *retryMax, BrokerID: *brokerID,
			WhichBrokerWhenConsumeSlowly: *slowly, NotifyConsumerIdsChangedEnable: *notify, ConsumeTimeoutMinute: 15, Attributes: am}
		if *policy != "" {
			if !json.Valid([]byte(*policy)) {
				return usage("-p: not JSON: %s", *policy)
			}
			cfg.GroupRetryPolicy = json.RawMessage(*policy)
		}
		addrs, err := e.targets(*broker, *cluster)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(cfg)
		for _, a := range addrs {
			if _, err := e.cli.invoke(a, codeUpdateAndCreateSubGroup, nil, body); err != nil {
				return err
			}
			fmt.Fprintf(e.out, "create subscription group to %s success.\n", a)
		}
		fmt.Fprintf(e.out, "%s\n", cfg)
		return nil
	}
}

func deleteSubGroup(fs *flag.FlagSet) func(*env) error {
	broker := fs.String("b", "", "delete subscription group from which broker")
	cluster := fs.String("c", "", "delete subscription group from which cluster")
	group := fs.String("g", "", "subscription group name")
	clean := boolArg(fs, "r", false, "remove offset")
	return func(e *env) error {
		g := strings.TrimSpace(*group)
		if g == "" {
			return usage("-g groupName is required")
		}
		addrs, err := e.targets(*broker, *cluster)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if _, err := e.cli.invoke(a, codeDeleteSubGroup, map[string]string{"groupName": g, "cleanOffset": strconv.FormatBool(*clean)}, nil); err != nil {
				return err
			}
			if *cluster != "" {
				fmt.Fprintf(e.out, "delete subscription group [%s] from broker [%s] in cluster [%s] success.\n", g, a, *cluster)
			} else {
				fmt.Fprintf(e.out, "delete subscription group [%s] from broker [%s] success.\n", g, a)
			}
		}
		return nil
	}
}

type offsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	PullOffset     int64 `json:"pullOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

func consumerProgress(fs *flag.FlagSet) func(*env) error {
	group := fs.String("g", "", "consumer group name")
	topic := fs.String("t", "", "topic name")
	return func(e *env) error {
		g := strings.TrimSpace(*group)
		if g == "" {
			return usage("-g groupName is required")
		}
		rd, err := e.route(retryPrefix + g)
		if err != nil {
			return err
		}
		addrs, _ := routeMasters(rd)
		merged := map[string]offsetWrapper{}
		var tps float64
		for _, a := range addrs {
			ext := map[string]string{"consumerGroup": g}
			if *topic != "" {
				ext["topic"] = *topic
			}
			resp, err := e.cli.invoke(a, codeGetConsumeStats, ext, nil)
			if err != nil {
				return err
			}
			var cs struct {
				OffsetTable map[string]offsetWrapper `json:"offsetTable"`
				ConsumeTps  float64                  `json:"consumeTps"`
			}
			if err := decodeJSON(resp.Body, &cs); err != nil {
				return fmt.Errorf("consume stats from %s: %w", a, err)
			}
			for k, v := range cs.OffsetTable {
				merged[k] = v
			}
			tps += cs.ConsumeTps
		}
		keys, table, err := mqTable(merged)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s\n",
			"#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#Inflight", "#LastTime")
		var diffTotal, inflightTotal int64
		for _, mq := range keys {
			o := table[mq]
			diff, inflight := o.BrokerOffset-o.ConsumerOffset, o.PullOffset-o.ConsumerOffset
			if inflight < 0 {
				inflight = 0
			}
			diffTotal += diff
			inflightTotal += inflight
			last := "N/A"
			if o.LastTimestamp > 0 {
				last = time.UnixMilli(o.LastTimestamp).Format("2006-01-02 15:04:05")
			}
			fmt.Fprintf(e.out, "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s\n",
				frontStringAtLeast(mq.Topic, 64), frontStringAtLeast(mq.BrokerName, 32), mq.QueueID, o.BrokerOffset, o.ConsumerOffset, diff, inflight, last)
		}
		fmt.Fprintf(e.out, "\nConsume TPS: %.2f\nConsume Diff Total: %d\nConsume Inflight Total: %d\n", tps, diffTotal, inflightTotal)
		return nil
	}
}

func consumerConnection(fs *flag.FlagSet) func(*env) error {
	group := fs.String("g", "", "consumer group name")
	broker := fs.String("b", "", "broker address")
	return func(e *env) error {
		g := strings.TrimSpace(*group)
		if g == "" {
			return usage("-g consumerGroup is required")
		}
		addr := *broker
		if addr == "" {
			rd, err := e.route(retryPrefix + g)
			if err != nil {
				return err
			}
			addrs, _ := routeMasters(rd)
			if len(addrs) == 0 {
				return fmt.Errorf("the consumer group %s has no broker", g)
			}
			addr = addrs[0]
		}
		resp, err := e.cli.invoke(addr, codeGetConsumerConnList, map[string]string{"consumerGroup": g}, nil)
		if err != nil {
			return err
		}
		var cc struct {
			ConnectionSet []struct {
				ClientID   string `json:"clientId"`
				ClientAddr string `json:"clientAddr"`
				Language   string `json:"language"`
				Version    int    `json:"version"`
			} `json:"connectionSet"`
			SubscriptionTable map[string]struct {
				Topic     string `json:"topic"`
				SubString string `json:"subString"`
			} `json:"subscriptionTable"`
			ConsumeType      string `json:"consumeType"`
			MessageModel     string `json:"messageModel"`
			ConsumeFromWhere string `json:"consumeFromWhere"`
		}
		if err := decodeJSON(resp.Body, &cc); err != nil {
			return fmt.Errorf("consumer connections: %w", err)
		}
		fmt.Fprintf(e.out, "%-36s %-22s %-10s %s\n", "#ClientId", "#ClientAddr", "#Language", "#Version")
		for _, c := range cc.ConnectionSet {
			fmt.Fprintf(e.out, "%-36s %-22s %-10s %s\n", c.ClientID, c.ClientAddr, c.Language, versionDesc(c.Version))
		}
		fmt.Fprintf(e.out, "\nBelow is subscription:\n")
		fmt.Fprintf(e.out, "%-20s %s\n", "#Topic", "#SubExpression")
		topics := make([]string, 0, len(cc.SubscriptionTable))
		for t := range cc.SubscriptionTable {
			topics = append(topics, t)
		}
		sortStrings(topics)
		for _, t := range topics {
			fmt.Fprintf(e.out, "%-20s %s\n", t, cc.SubscriptionTable[t].SubString)
		}
		fmt.Fprintf(e.out, "\nConsumeType: %s\nMessageModel: %s\nConsumeFromWhere: %s\n", cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere)
		return nil
	}
}

// parseTimestamp is ResetOffsetByTimeCommand's -s: now, Unix ms, or
// yyyy-MM-dd#HH:mm:ss:SSS (local time).
func parseTimestamp(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "now" {
		return now.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	t, err := time.ParseInLocation("2006-01-02#15:04:05:000", s, time.Local)
	if err != nil {
		return 0, usage("-s %q: want now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS", s)
	}
	return t.UnixMilli(), nil
}

func resetOffsetByTime(fs *flag.FlagSet) func(*env) error {
	group := fs.String("g", "", "set the consumer group")
	topic := fs.String("t", "", "set the topic")
	stamp := fs.String("s", "", "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
	force := boolArg(fs, "f", true, "set the force rollback by timestamp switch[true|false]. Deprecated.")
	return func(e *env) error {
		g, t := strings.TrimSpace(*group), strings.TrimSpace(*topic)
		if g == "" || t == "" || *stamp == "" {
			return usage("-g group, -t topic and -s timestamp are required")
		}
		ms, err := parseTimestamp(*stamp, time.Now())
		if err != nil {
			return err
		}
		rd, err := e.route(t)
		if err != nil {
			return err
		}
		addrs, _ := routeMasters(rd)
		merged := map[string]int64{}
		for _, a := range addrs {
			ext := map[string]string{"topic": t, "group": g, "timestamp": strconv.FormatInt(ms, 10), "isForce": strconv.FormatBool(*force), "queueId": "-1"}
			resp, err := e.cli.invoke(a, codeInvokeBrokerResetOffset, ext, nil)
			if err != nil {
				return err
			}
			var body struct {
				OffsetTable map[string]int64 `json:"offsetTable"`
			}
			if len(resp.Body) > 0 {
				if err := decodeJSON(resp.Body, &body); err != nil {
					return fmt.Errorf("reset answer from %s: %w", a, err)
				}
			}
			for k, v := range body.OffsetTable {
				merged[k] = v
			}
		}
		keys, table, err := mqTable(merged)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "start reset consumer offset by specified, group[%s], topic[%s], force[%t], timestamp(string)[%s], timestamp(long)[%d]\n", g, t, *force, *stamp, ms)
		fmt.Fprintf(e.out, "%-40s  %-40s  %-40s\n", "#brokerName", "#queueId", "#offset")
		for _, mq := range keys {
			fmt.Fprintf(e.out, "%-40s  %-40d  %-40d\n", mq.BrokerName, mq.QueueID, table[mq])
		}
		return nil
	}
}
