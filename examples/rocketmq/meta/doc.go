// Package meta keeps the broker's subscription group and topic
// configuration tables. The group table: Apache
// RocketMQ's SubscriptionGroupConfig per consumer group, created and
// changed by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (mqadmin updateSubGroup),
// listed by GET_ALL_SUBSCRIPTIONGROUP_CONFIG, removed by
// DELETE_SUBSCRIPTIONGROUP, and persisted in one JSON file written
// atomically (temporary file, fsync, rename, directory fsync).
//
// What the broker honours of a group: ConsumeMessageOrderly makes it FIFO
// on both protocols (Groups.Orderly; the gRPC server's
// Options.GroupFIFO), whatever its name. The other fields are kept and
// answered back as Apache does.
//
// The topic table keeps what UPDATE_AND_CREATE_TOPIC set (Apache's
// TopicConfig): read and write queue numbers, permission and the
// message.type attribute, parsed with Apache's checks and answer codes
// (ParseCreateTopic; a refusal is a *Refusal with the code and remark).
// The bodies of the admin answers (stats tables keyed by queue objects, as
// fastjson writes them) are built here too, so the protocol handlers stay
// thin.
package meta
