package wire

// Request codes (Apache RocketMQ's RequestCode) this broker serves or sends.
const (
	CodeSendMessage              int16 = 10
	CodePullMessage              int16 = 11
	CodeQueryConsumerOffset      int16 = 14
	CodeUpdateConsumerOffset     int16 = 15
	CodeSearchOffsetByTimestamp  int16 = 29
	CodeGetMaxOffset             int16 = 30
	CodeGetMinOffset             int16 = 31
	CodeHeartbeat                int16 = 34
	CodeUnregisterClient         int16 = 35
	CodeConsumerSendMsgBack      int16 = 36
	CodeGetConsumerListByGroup   int16 = 38
	CodeNotifyConsumerIdsChanged int16 = 40
	CodeLockBatchMQ              int16 = 41
	CodeUnlockBatchMQ            int16 = 42
	CodeGetRouteInfoByTopic      int16 = 105
	CodeSendMessageV2            int16 = 310
	CodeSendBatchMessage         int16 = 320
)

// Response codes (Apache RocketMQ's ResponseCode).
const (
	Success                 int16 = 0
	SystemError             int16 = 1
	SystemBusy              int16 = 2
	RequestCodeNotSupported int16 = 3
	MessageIllegal          int16 = 13
	NoPermission            int16 = 16
	ServiceNotAvailable     int16 = 14
	TopicNotExist           int16 = 17
	PullNotFound            int16 = 19
	PullRetryImmediately    int16 = 20
	PullOffsetMoved         int16 = 21
	QueryNotFound           int16 = 22
	SubscriptionParseFailed int16 = 23
)
