package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// codeQueryNotFound is Apache's QUERY_NOT_FOUND: a query that found nothing.
const codeQueryNotFound int16 = 22

func init() {
	commands["queryMsgByKey"] = command{"Query Message by Key.", queryMsgByKey}
	commands["queryMsgById"] = command{"Query Message by Id.", queryMsgByID}
}

// decodeMessages decodes a QUERY_MESSAGE / VIEW_MESSAGE_BY_ID body (the
// store's message encoding) with the v2 client's decoder; a body it cannot
// read is an error, never a crash.
func decodeMessages(body []byte) (msgs []*primitive.MessageExt, err error) {
	defer func() {
		if r := recover(); r != nil {
			msgs, err = nil, fmt.Errorf("%w: undecodable message body: %v", errJSON, r)
		}
	}()
	return primitive.DecodeMessage(body), nil
}

// query runs QUERY_MESSAGE on every master of the topic's route.
func (e *env) query(topic, key string, unique bool, max int, begin, end int64) ([]*primitive.MessageExt, error) {
	rd, err := e.route(topic)
	if err != nil {
		return nil, err
	}
	addrs, _ := routeMasters(rd)
	var out []*primitive.MessageExt
	for _, a := range addrs {
		ext := map[string]string{"topic": topic, "key": key, "maxNum": strconv.Itoa(max),
			"beginTimestamp": strconv.FormatInt(begin, 10), "endTimestamp": strconv.FormatInt(end, 10)}
		if unique {
			ext["_UNIQUE_KEY_QUERY"] = "true"
		}
		resp, err := e.cli.invoke(a, codeQueryMessage, ext, nil, codeQueryNotFound)
		if err != nil {
			return nil, err
		}
		if resp.Code == codeQueryNotFound {
			continue
		}
		msgs, err := decodeMessages(resp.Body)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

func queryMsgByKey(fs *flag.FlagSet) func(*env) error {
	topic := fs.String("t", "", "Topic name")
	key := fs.String("k", "", "Message Key")
	begin := fs.Int64("b", 0, "Begin timestamp(ms). default:0, eg:1676730526212")
	end := fs.Int64("e", math.MaxInt64, "End timestamp(ms). default:Long.MAX_VALUE, eg:1676730526212")
	max := fs.Int("m", 64, "The maximum number of messages returned by the query, default:64")
	return func(e *env) error {
		t, k := strings.TrimSpace(*topic), strings.TrimSpace(*key)
		if t == "" || k == "" {
			return usage("-t topic and -k msgKey are required")
		}
		msgs, err := e.query(t, k, false, *max, *begin, *end)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "%-50s %4s %40s\n", "#Message ID", "#QID", "#Offset")
		for _, m := range msgs {
			fmt.Fprintf(e.out, "%-50s %4d %40d\n", m.MsgId, m.Queue.QueueId, m.QueueOffset)
		}
		return nil
	}
}

func queryMsgByID(fs *flag.FlagSet) func(*env) error {
	topic := fs.String("t", "", "topic name")
	id := fs.String("i", "", "Message Id")
	return func(e *env) error {
		ids := strings.TrimSpace(*id)
		if ids == "" {
			return usage("-i msgId is required")
		}
		for _, one := range strings.Split(ids, ",") {
			m, err := e.viewMessage(strings.TrimSpace(*topic), strings.TrimSpace(one))
			if err != nil {
				return err
			}
			if m == nil {
				fmt.Fprintf(e.out, "\nMessage not found!")
				continue
			}
			printMsg(e, m)
		}
		return nil
	}
}

// viewMessage finds a message by id as Apache's admin does: as a unique
// key (UNIQ_KEY) on the topic's brokers when -t is given, else (or when
// that finds nothing) as an offset message id naming its broker and
// commit-log offset (VIEW_MESSAGE_BY_ID).
func (e *env) viewMessage(topic, id string) (*primitive.MessageExt, error) {
	if topic != "" {
		msgs, err := e.query(topic, id, true, 32, 0, math.MaxInt64)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.MsgId == id || m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex) == id {
				return m, nil
			}
		}
	}
	mid, err := primitive.UnmarshalMsgID([]byte(id))
	if err != nil {
		if topic != "" {
			return nil, nil
		}
		return nil, usage("%q is no offset message id (give -t topic to look it up as a unique key)", id)
	}
	addr := fmt.Sprintf("%s:%d", mid.Addr, mid.Port)
	resp, err := e.cli.invoke(addr, codeViewMessageByID, map[string]string{"offset": strconv.FormatInt(mid.Offset, 10)}, nil)
	if err != nil {
		return nil, err
	}
	msgs, err := decodeMessages(resp.Body)
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	return msgs[0], nil
}

// printMsg is QueryMsgByIdSubCommand's printMsg, with the body printed
// instead of written to a temporary file.
func printMsg(e *env, m *primitive.MessageExt) {
	line := func(k string, v any) { fmt.Fprintf(e.out, "%-20s %v\n", k, v) }
	line("OffsetID:", m.OffsetMsgId)
	line("Topic:", m.Topic)
	line("Tags:", "["+m.GetTags()+"]")
	line("Keys:", "["+m.GetKeys()+"]")
	line("Queue ID:", m.Queue.QueueId)
	line("Queue Offset:", m.QueueOffset)
	line("CommitLog Offset:", m.CommitLogOffset)
	line("Reconsume Times:", m.ReconsumeTimes)
	line("Born Timestamp:", humanTime(m.BornTimestamp))
	line("Store Timestamp:", humanTime(m.StoreTimestamp))
	line("Born Host:", m.BornHost)
	line("Store Host:", m.StoreHost)
	line("System Flag:", m.SysFlag)
	line("Properties:", javaMap(m.GetProperties()))
	line("Message Body:", string(m.Body))
}
