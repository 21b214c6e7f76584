package replicated

import (
	"strings"

	"github.com/brokercore/brokercore"
)

// Topics of the replicated log in every node's topic table.
//
// Only the node that leads creates a topic on a send (or a send-back), and
// the topic tables are per node: a follower knew the topic only once a
// route lookup there created it. One that never had a lookup answered
// TOPIC_NOT_EXIST to every pull of the topic once it led, though its
// replica held the messages. So every node enters each topic the log
// holds messages of, with the defaults a route lookup on it would give
// (one queue for a retry or dead-letter topic). The log's own topics
// (scheduler, transactions, the admin log) are not entered.

// learnTopic is the store's append hook: it enters topic unless the table
// has it.
func (s *Server) learnTopic(topic string, _ int, _ int64) {
	if _, ok := s.topics.Queues(topic); ok || !clientTopic(topic) {
		return
	}
	q := 0 // the default
	if strings.HasPrefix(topic, brokercore.RetryPrefix) || strings.HasPrefix(topic, brokercore.DeadLetterPrefix) {
		q = 1
	}
	if _, err := s.topics.Ensure(topic, q); err != nil {
		s.log.Warn("topic of the replicated log not entered in the topic table", "topic", topic, "err", err)
		return
	}
	s.log.Info("topic of the replicated log entered in the topic table", "topic", topic)
}

// learnTopics enters the topics the replica held before learnTopic was
// hooked: those with messages left (a deleted topic's queues stay in the
// store, empty).
func (s *Server) learnTopics() {
	st := s.node.Store()
	for _, topic := range st.Topics() {
		for _, q := range st.Queues(topic) {
			if st.MaxOffset(topic, q) > st.MinOffset(topic, q) {
				s.learnTopic(topic, q, 0)
				break
			}
		}
	}
}

// clientTopic reports whether topic is one clients use: not reserved, or a
// retry or dead-letter topic.
func clientTopic(topic string) bool {
	return !brokercore.ReservedTopic(topic) || strings.HasPrefix(topic, brokercore.RetryPrefix) ||
		strings.HasPrefix(topic, brokercore.DeadLetterPrefix)
}
