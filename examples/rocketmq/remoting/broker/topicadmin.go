package broker

import "github.com/brokercore/brokercore"

// Set gives topic n queues, creating it if needed (UPDATE_AND_CREATE_TOPIC:
// an admin may grow or shrink a topic; the messages of a queue beyond a
// shrunk count stay in the log, unrouted, and come back if it grows
// again).
func (t *Topics) Set(topic string, n int) error {
	if err := brokercore.CheckTopicName(topic); err != nil {
		return err
	}
	if n <= 0 {
		n = t.def
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.m[topic]
	if had && old == n {
		return nil
	}
	t.m[topic] = n
	if err := t.saveLocked(); err != nil {
		if had {
			t.m[topic] = old
		} else {
			delete(t.m, topic)
		}
		return err
	}
	return nil
}

// Remove deletes topic from the table (DELETE_TOPIC_IN_BROKER /
// _IN_NAMESRV): its route goes. TBW102 stays. Removing a topic the table
// does not hold is not an error (Apache's delete is idempotent too).
func (t *Topics) Remove(topic string) error {
	if topic == brokercore.DefaultTopic {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.m[topic]
	if !had {
		return nil
	}
	delete(t.m, topic)
	if err := t.saveLocked(); err != nil {
		t.m[topic] = old
		return err
	}
	return nil
}
