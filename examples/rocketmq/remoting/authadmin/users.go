package authadmin

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// userBody decodes the UserInfo of a create or update: Apache fails on a
// missing or bad body with SYSTEM_ERROR, and names the user by the header.
func userBody(req *wire.Command) (UserInfo, string, result, bool) {
	name := strings.TrimSpace(req.ExtFields["username"])
	if name == "" {
		return UserInfo{}, "", fail(InvalidParameter, "The username is blank"), false
	}
	u, err := DecodeUserInfo(req.Body)
	if err != nil {
		return UserInfo{}, "", fail(wire.SystemError, "The body of user is invalid: %v", err), false
	}
	u.Username = name
	return u, name, result{}, true
}

// createUser is AUTH_CREATE_USER: header username, body UserInfo.
func (s *Service) createUser(req *wire.Command) result {
	u, name, r, good := userBody(req)
	if !good {
		return r
	}
	super := userType(u.UserType) == userTypeSuper
	if super && !s.callerIsSuper(req) {
		return fail(wire.SystemError, "The super user can only be create by super user")
	}
	if strings.TrimSpace(u.Password) == "" {
		return fail(wire.NoPermission, "password can not be blank")
	}
	return s.edit(req, func(c *acl.Config) error {
		if _, exists := c.User(name); exists {
			return refuse(wire.NoPermission, "The user is existed")
		}
		return c.AddUser(acl.UserConfig{AccessKey: name, SecretKey: u.Password, SuperUser: super,
			Disabled: userStatus(u.UserStatus) == statusDisable})
	})
}

// updateUser is AUTH_UPDATE_USER: a non-blank password, a known type and a
// known status each replace the user's; the rest stays.
func (s *Service) updateUser(req *wire.Command) result {
	u, name, r, good := userBody(req)
	if !good {
		return r
	}
	typ := userType(u.UserType)
	callerSuper := s.callerIsSuper(req)
	if typ == userTypeSuper && !callerSuper {
		return fail(wire.SystemError, "The super user can only be update by super user")
	}
	return s.edit(req, func(c *acl.Config) error {
		old, exists := c.User(name)
		if !exists {
			return refuse(wire.NoPermission, "The user is not exist")
		}
		if old.SuperUser && !callerSuper {
			return refuse(wire.NoPermission, "The super user can only be update by super user")
		}
		if strings.TrimSpace(u.Password) != "" {
			old.SecretKey = u.Password
		}
		if typ != "" {
			old.SuperUser = typ == userTypeSuper
		}
		if st := userStatus(u.UserStatus); st != "" {
			old.Disabled = st == statusDisable
		}
		return c.PutUser(old)
	})
}

// deleteUser is AUTH_DELETE_USER: the user and its rules go; an unknown
// user is SUCCESS, as in Apache.
func (s *Service) deleteUser(req *wire.Command) result {
	name := strings.TrimSpace(req.ExtFields["username"])
	if name == "" {
		return fail(wire.NoPermission, "username can not be blank")
	}
	callerSuper := s.callerIsSuper(req)
	return s.edit(req, func(c *acl.Config) error {
		old, exists := c.User(name)
		if !exists {
			return errUnchanged
		}
		if old.SuperUser && !callerSuper {
			return refuse(wire.NoPermission, "The super user can only be update by super user")
		}
		c.RemoveUser(name)
		return nil
	})
}

// userInfo is what Apache answers for a user (its password included, as
// Apache's getUser does: only a caller with Get on the cluster may ask).
func userInfo(u acl.UserConfig) UserInfo {
	info := UserInfo{Username: u.AccessKey, Password: u.SecretKey, UserType: userTypeNormal, UserStatus: statusEnable}
	if u.SuperUser {
		info.UserType = userTypeSuper
	}
	if u.Disabled {
		info.UserStatus = statusDisable
	}
	return info
}

// getUser is AUTH_GET_USER: the UserInfo, or SUCCESS without a body for a
// user that does not exist.
func (s *Service) getUser(req *wire.Command) result {
	name := strings.TrimSpace(req.ExtFields["username"])
	if name == "" {
		return fail(InvalidParameter, "The username is blank")
	}
	u, exists := s.az.Config().User(name)
	if !exists {
		return ok(nil)
	}
	return marshal(userInfo(u))
}

// listUser is AUTH_LIST_USER: the users whose name contains the header's
// filter, by name; none is SUCCESS without a body.
func (s *Service) listUser(req *wire.Command) result {
	filter := strings.TrimSpace(req.ExtFields["filter"])
	users := s.az.Config().Users
	slices.SortFunc(users, func(a, b acl.UserConfig) int { return strings.Compare(a.AccessKey, b.AccessKey) })
	var out []UserInfo
	for _, u := range users {
		if filter == "" || strings.Contains(u.AccessKey, filter) {
			out = append(out, userInfo(u))
		}
	}
	if len(out) == 0 {
		return ok(nil)
	}
	return marshal(out)
}

func marshal(v any) result {
	b, err := json.Marshal(v)
	if err != nil {
		return fail(wire.SystemError, systemErrorRemark)
	}
	return ok(b)
}
