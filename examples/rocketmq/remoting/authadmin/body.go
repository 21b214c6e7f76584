package authadmin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON bodies, as Apache's UserInfo and AclInfo (remoting/protocol/
// body): fastjson writes keys in alphabetical order and leaves out nulls,
// and so do these (field order, omitempty).

// UserInfo is Apache's UserInfo.
type UserInfo struct {
	Password   string `json:"password,omitempty"`
	UserStatus string `json:"userStatus,omitempty"` // "enable" or "disable"
	UserType   string `json:"userType,omitempty"`   // "Super" or "Normal"
	Username   string `json:"username,omitempty"`
}

// ACLInfo is Apache's AclInfo: a subject ("User:name") and its policies.
type ACLInfo struct {
	Policies []PolicyInfo `json:"policies,omitempty"`
	Subject  string       `json:"subject,omitempty"`
}

// PolicyInfo is Apache's AclInfo.PolicyInfo.
type PolicyInfo struct {
	Entries    []PolicyEntryInfo `json:"entries,omitempty"`
	PolicyType string            `json:"policyType,omitempty"` // "Custom" (or "Default", refused here)
}

// PolicyEntryInfo is Apache's AclInfo.PolicyEntryInfo: one resource.
type PolicyEntryInfo struct {
	Actions   []string `json:"actions,omitempty"`
	Decision  string   `json:"decision,omitempty"`
	Resource  string   `json:"resource,omitempty"`
	SourceIps []string `json:"sourceIps,omitempty"`
}

// Apache's names (UserType, UserStatus, PolicyType, SubjectType).
const (
	userTypeSuper  = "Super"
	userTypeNormal = "Normal"
	statusEnable   = "enable"
	statusDisable  = "disable"
	policyCustom   = "Custom"
	policyDefault  = "Default"
	subjectUser    = "User"
)

// errNoBody: the request has no body (Apache decodes null and fails).
var errNoBody = errors.New("no body")

// DecodeUserInfo reads a UserInfo body. Unknown keys are ignored, as
// fastjson does; an empty body, "null", anything but one JSON object, or
// data after it is an error.
func DecodeUserInfo(body []byte) (UserInfo, error) {
	var u UserInfo
	err := decodeObject(body, &u)
	return u, err
}

// DecodeACLInfo reads an AclInfo body, as DecodeUserInfo does.
func DecodeACLInfo(body []byte) (ACLInfo, error) {
	var a ACLInfo
	err := decodeObject(body, &a)
	return a, err
}

func decodeObject(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return errNoBody
	}
	if trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// parseSubject reads Apache's subject key "User:name" (the type
// case-insensitive, as SubjectType.getByName) and returns name. A bare
// name (this package's file accepts one) is the user of that name.
func parseSubject(s string) (string, error) {
	s = strings.TrimSpace(s)
	typ, name, found := strings.Cut(s, ":")
	switch {
	case s == "":
		return "", errors.New("The subject is null.")
	case !found:
		return s, nil
	case !strings.EqualFold(typ, subjectUser):
		return "", fmt.Errorf("The subject type %s is not supported: only User.", typ)
	case name == "":
		return "", errors.New("The subject is null.")
	}
	return name, nil
}

func subjectKey(user string) string { return subjectUser + ":" + user }

// userType reads Apache's UserType name: Super or Normal,
// case-insensitively; anything else is no type ("").
func userType(s string) string {
	switch {
	case strings.EqualFold(s, userTypeSuper):
		return userTypeSuper
	case strings.EqualFold(s, userTypeNormal):
		return userTypeNormal
	}
	return ""
}

// userStatus reads Apache's UserStatus name: enable or disable,
// case-insensitively; anything else is no status ("").
func userStatus(s string) string {
	switch {
	case strings.EqualFold(s, statusEnable):
		return statusEnable
	case strings.EqualFold(s, statusDisable):
		return statusDisable
	}
	return ""
}
