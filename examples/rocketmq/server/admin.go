package server

import (
	"path/filepath"

	"github.com/brokercore/brokercore/examples/rocketmq/meta"
)

// Files of the admin tables under Config.Dir (Apache's names).
const (
	groupsFile       = "subscriptionGroup.json"
	topicConfigsFile = "topics-config.json"
)

// openMeta opens the subscription group and topic configuration tables.
func (s *Server) openMeta() (err error) {
	if s.groups, err = meta.OpenGroups(filepath.Join(s.cfg.Dir, groupsFile)); err != nil {
		return err
	}
	s.topicConfigs, err = meta.OpenTopics(filepath.Join(s.cfg.Dir, topicConfigsFile))
	return err
}

// routeConfig is a topic's admin-set queue numbers and permission for the
// name server's routes.
func (s *Server) routeConfig(topic string) (read, write, perm int, ok bool) {
	c, ok := s.topicConfigs.Get(topic)
	if !ok {
		return 0, 0, 0, false
	}
	return c.ReadQueueNums, c.WriteQueueNums, c.Perm, true
}

// Groups is the subscription group table (mqadmin updateSubGroup): a
// group with consumeMessageOrderly is FIFO on both protocols.
func (s *Server) Groups() *meta.Groups { return s.groups }

// TopicConfigs is the topic configuration table (mqadmin updateTopic):
// queue numbers, permission, message.type.
func (s *Server) TopicConfigs() *meta.Topics { return s.topicConfigs }
