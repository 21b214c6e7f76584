package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
)

// The user and ACL subcommands of Apache 5.3 (tools/command/auth): their
// names, flags and output. Each goes to -b brokerAddr or to the masters of
// -c clusterName; the caller signs with -ak/-sk (main.go).
func init() {
	commands["createUser"] = command{"Create user to cluster.", createUser}
	commands["updateUser"] = command{"Update user to cluster.", updateUser}
	commands["deleteUser"] = command{"Delete user from cluster.", deleteUser}
	commands["getUser"] = command{"Get user from cluster.", getUser}
	commands["listUser"] = command{"List user from cluster.", listUser}
	commands["createAcl"] = command{"Create acl to cluster.", createACL}
	commands["updateAcl"] = command{"Update acl to cluster.", updateACL}
	commands["deleteAcl"] = command{"Delete acl from cluster.", deleteACL}
	commands["getAcl"] = command{"Get acl from cluster.", getACL}
	commands["listAcl"] = command{"List acl from cluster.", listACL}
}

// Apache's output formats (GetUserSubCommand, GetAclSubCommand).
const (
	userFormat = "%-16s  %-22s  %-22s  %-22s\n"
	aclFormat  = "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s\n"
)

// targetFlags are -b and -c, one of which is required.
func targetFlags(fs *flag.FlagSet, what string) (broker, cluster *string) {
	broker = fs.String("b", "", what+" which broker")
	cluster = fs.String("c", "", what+" which cluster")
	return broker, cluster
}

// each runs fn on every target, printing Apache's success line after each.
func (e *env) each(broker, cluster, done string, fn func(addr string) error) error {
	addrs, err := e.targets(strings.TrimSpace(broker), strings.TrimSpace(cluster))
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if err := fn(a); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "%s to %s success.\n", done, a)
	}
	return nil
}

func jsonBytes(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings always marshal
	}
	return b
}

func createUser(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "create user to")
	name := fs.String("u", "", "the username of user to create.")
	password := fs.String("p", "", "the password of user to create")
	typ := fs.String("t", "", "the userType of user to create")
	return func(e *env) error {
		u := authadmin.UserInfo{Username: strings.TrimSpace(*name), Password: strings.TrimSpace(*password), UserType: strings.TrimSpace(*typ)}
		if u.Username == "" || u.Password == "" {
			return usage("-u username and -p password are required")
		}
		return e.each(*broker, *cluster, "create user", func(a string) error {
			_, err := e.cli.invoke(a, authadmin.CodeCreateUser, map[string]string{"username": u.Username}, jsonBytes(u))
			return err
		})
	}
}

func updateUser(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "update user to")
	name := fs.String("u", "", "the username of user to update.")
	password := fs.String("p", "", "the password of user to update")
	typ := fs.String("t", "", "the userType of user to update")
	status := fs.String("s", "", "the userStatus of user to update")
	return func(e *env) error {
		u := authadmin.UserInfo{Username: strings.TrimSpace(*name), Password: strings.TrimSpace(*password),
			UserType: strings.TrimSpace(*typ), UserStatus: strings.TrimSpace(*status)}
		if u.Username == "" {
			return usage("-u username is required")
		}
		if u.Password == "" && u.UserType == "" && u.UserStatus == "" {
			return usage("give -p password, -t userType or -s userStatus")
		}
		return e.each(*broker, *cluster, "update user", func(a string) error {
			_, err := e.cli.invoke(a, authadmin.CodeUpdateUser, map[string]string{"username": u.Username}, jsonBytes(u))
			return err
		})
	}
}

func deleteUser(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "delete user from")
	name := fs.String("u", "", "the username of user to delete.")
	return func(e *env) error {
		u := strings.TrimSpace(*name)
		if u == "" {
			return usage("-u username is required")
		}
		return e.each(*broker, *cluster, "delete user", func(a string) error {
			_, err := e.cli.invoke(a, authadmin.CodeDeleteUser, map[string]string{"username": u}, nil)
			return err
		})
	}
}

func printUsers(e *env, users []authadmin.UserInfo) {
	fmt.Fprintf(e.out, userFormat, "#UserName", "#Password", "#UserType", "#UserStatus")
	for _, u := range users {
		fmt.Fprintf(e.out, userFormat, u.Username, u.Password, u.UserType, u.UserStatus)
	}
}

func getUser(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "get user for")
	name := fs.String("u", "", "the username of user to get")
	return func(e *env) error {
		addrs, err := e.targets(strings.TrimSpace(*broker), strings.TrimSpace(*cluster))
		if err != nil {
			return err
		}
		for _, a := range addrs {
			resp, err := e.cli.invoke(a, authadmin.CodeGetUser, map[string]string{"username": strings.TrimSpace(*name)}, nil)
			if err != nil {
				return err
			}
			if len(resp.Body) > 0 {
				u, err := authadmin.DecodeUserInfo(resp.Body)
				if err != nil {
					return fmt.Errorf("user from %s: %w", a, err)
				}
				printUsers(e, []authadmin.UserInfo{u})
				return nil // the first broker that knows the user answers
			}
		}
		return nil
	}
}

func listUser(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "list user for")
	filter := fs.String("f", "", "the filter to list users")
	return func(e *env) error {
		addrs, err := e.targets(strings.TrimSpace(*broker), strings.TrimSpace(*cluster))
		if err != nil {
			return err
		}
		for _, a := range addrs {
			resp, err := e.cli.invoke(a, authadmin.CodeListUser, map[string]string{"filter": strings.TrimSpace(*filter)}, nil)
			if err != nil {
				return err
			}
			var users []authadmin.UserInfo
			if len(resp.Body) > 0 {
				if err := json.Unmarshal(resp.Body, &users); err != nil {
					return fmt.Errorf("users from %s: %w", a, err)
				}
			}
			if len(users) > 0 {
				printUsers(e, users)
				if *cluster != "" && *broker == "" {
					fmt.Fprintf(e.out, "get user from %s success.\n", a)
				}
				return nil
			}
		}
		return nil
	}
}

// splitList is Apache's StringUtils.split(v, ',') with each part trimmed.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func createACL(fs *flag.FlagSet) func(*env) error {
	return putACL(fs, "create", authadmin.CodeCreateACL)
}
func updateACL(fs *flag.FlagSet) func(*env) error {
	return putACL(fs, "update", authadmin.CodeUpdateACL)
}

// putACL is createAcl and updateAcl: Apache's AclInfo.of, one entry per
// resource with the same actions, source addresses and decision.
func putACL(fs *flag.FlagSet, verb string, code int16) func(*env) error {
	broker, cluster := targetFlags(fs, verb+" acl to")
	subject := fs.String("s", "", "the subject of acl to "+verb+".")
	resources := fs.String("r", "", "the resources of acl to "+verb)
	actions := fs.String("a", "", "the actions of acl to "+verb)
	ips := fs.String("i", "", "the sourceIps of acl to "+verb)
	decision := fs.String("d", "", "the decision of acl to "+verb)
	return func(e *env) error {
		s, d := strings.TrimSpace(*subject), strings.TrimSpace(*decision)
		if s == "" || *resources == "" || *actions == "" || d == "" {
			return usage("-s subject, -r resources, -a actions and -d decision are required")
		}
		var entries []authadmin.PolicyEntryInfo
		for _, r := range splitList(*resources) {
			entries = append(entries, authadmin.PolicyEntryInfo{Resource: r, Actions: splitList(*actions), SourceIps: splitList(*ips), Decision: d})
		}
		body := jsonBytes(authadmin.ACLInfo{Subject: s, Policies: []authadmin.PolicyInfo{{Entries: entries}}})
		return e.each(*broker, *cluster, verb+" acl", func(a string) error {
			_, err := e.cli.invoke(a, code, map[string]string{"subject": s}, body)
			return err
		})
	}
}

func deleteACL(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "delete acl from")
	subject := fs.String("s", "", "the subject of acl to delete.")
	resource := fs.String("r", "", "the resources of acl to delete")
	return func(e *env) error {
		s := strings.TrimSpace(*subject)
		if s == "" {
			return usage("-s subject is required")
		}
		ext := map[string]string{"subject": s}
		if r := strings.TrimSpace(*resource); r != "" {
			ext["resource"] = r
		}
		return e.each(*broker, *cluster, "delete acl", func(a string) error {
			_, err := e.cli.invoke(a, authadmin.CodeDeleteACL, ext, nil)
			return err
		})
	}
}

// javaList prints a list as Java's List.toString does ("null" for none).
func javaList(s []string) string {
	if s == nil {
		return "null"
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func printACLs(e *env, acls []authadmin.ACLInfo) {
	fmt.Fprintf(e.out, aclFormat, "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
	for _, a := range acls {
		if len(a.Policies) == 0 {
			fmt.Fprintf(e.out, aclFormat, a.Subject, "", "", "", "", "")
		}
		for _, p := range a.Policies {
			for _, en := range p.Entries {
				fmt.Fprintf(e.out, aclFormat, a.Subject, p.PolicyType, en.Resource, javaList(en.Actions), javaList(en.SourceIps), en.Decision)
			}
		}
	}
}

func getACL(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "get acl for")
	subject := fs.String("s", "", "the subject of acl to get")
	return func(e *env) error {
		addrs, err := e.targets(strings.TrimSpace(*broker), strings.TrimSpace(*cluster))
		if err != nil {
			return err
		}
		for _, a := range addrs {
			resp, err := e.cli.invoke(a, authadmin.CodeGetACL, map[string]string{"subject": strings.TrimSpace(*subject)}, nil)
			if err != nil {
				return err
			}
			if len(resp.Body) > 0 {
				info, err := authadmin.DecodeACLInfo(resp.Body)
				if err != nil {
					return fmt.Errorf("acl from %s: %w", a, err)
				}
				printACLs(e, []authadmin.ACLInfo{info})
				return nil
			}
		}
		return nil
	}
}

func listACL(fs *flag.FlagSet) func(*env) error {
	broker, cluster := targetFlags(fs, "list acl for")
	subject := fs.String("s", "", "the subject of acl to filter.")
	resource := fs.String("r", "", "the resource of acl to filter.")
	return func(e *env) error {
		addrs, err := e.targets(strings.TrimSpace(*broker), strings.TrimSpace(*cluster))
		if err != nil {
			return err
		}
		ext := map[string]string{"subjectFilter": strings.TrimSpace(*subject), "resourceFilter": strings.TrimSpace(*resource)}
		for _, a := range addrs {
			resp, err := e.cli.invoke(a, authadmin.CodeListACL, ext, nil)
			if err != nil {
				return err
			}
			var acls []authadmin.ACLInfo
			if len(resp.Body) > 0 {
				if err := json.Unmarshal(resp.Body, &acls); err != nil {
					return fmt.Errorf("acls from %s: %w", a, err)
				}
			}
			if len(acls) > 0 {
				printACLs(e, acls)
				return nil
			}
		}
		return nil
	}
}
