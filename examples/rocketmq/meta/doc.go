// Package meta keeps the broker's subscription group table: Apache
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
package meta
