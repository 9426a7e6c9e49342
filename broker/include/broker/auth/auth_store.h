// AuthStore: users and their ACL rules, kept in the broker's metadata RocksDB under the
// "auth/user/" and "auth/acl/" key prefixes (this class owns both). Record grammar (versioned,
// CRC32C-protected values): docs/formats/auth.md. Model and matching: broker/auth/acl.h.
//
// Ownership: does not own the rocksdb::DB; the broker opens it and outlives this object.
// Thread-safety: every method may be called from any thread; an in-memory copy of all users and
// rules (loaded at Open, kept in step with every write under mu_) serves the per-request checks
// without touching RocksDB. Durability: writes use WriteOptions::sync = true and a WriteBatch
// (a user and its rules go together); a method returns OK only once the change is durable.
// Secret keys are stored as given (HMAC needs them; see docs/security.md "What is not
// protected") and never logged.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "broker/auth/acl.h"

namespace rocksdb {
class DB;
}

namespace tokimq::broker::auth {

// Value encodings (docs/formats/auth.md). Decode checks length, version, enum values and the
// CRC32C (which covers the key's access key and resource too): kDataLoss on mismatch.
std::string EncodeUserValue(const User& user);
absl::StatusOr<User> DecodeUserValue(const std::string& access_key, std::string_view value);
std::string EncodeRuleValue(const std::string& access_key, const AclRule& rule);
absl::StatusOr<AclRule> DecodeRuleValue(const std::string& access_key, const std::string& resource,
                                        std::string_view value);

class AuthStore {
 public:
  // Loads every auth record. kDataLoss names the key of a corrupt record.
  static absl::StatusOr<std::unique_ptr<AuthStore>> Open(rocksdb::DB* db);

  // kAlreadyExists; kInvalidArgument per ValidateAccessKey / ValidateSecretKey.
  absl::Status CreateUser(const User& user);
  // Removes the user and all its rules. kNotFound.
  absl::Status DeleteUser(const std::string& access_key);
  std::optional<User> GetUser(const std::string& access_key) const;
  // Sorted by access key; secrets included (callers that answer clients clear them).
  std::vector<User> ListUsers() const;
  size_t UserCount() const;

  // Adds or replaces the user's rule for rule.resource. kNotFound for an unknown user;
  // kInvalidArgument for an empty action set.
  absl::Status Grant(const std::string& access_key, const AclRule& rule);
  // Removes the user's rule for `resource`. kNotFound if the user or the rule is absent.
  absl::Status Revoke(const std::string& access_key, const ResourcePattern& resource);
  // The rules of one user ("" : of every user), keyed by access key, each sorted by resource.
  std::map<std::string, std::vector<AclRule>> ListRules(const std::string& access_key) const;

  // Bootstrap (--auth-init-user): creates `user` as a super user when no user exists; returns
  // true when it did. Errors as CreateUser.
  absl::StatusOr<bool> CreateInitialUser(const User& user);

  // Cluster mode (docs/security.md "Clusters"): makes the store hold exactly `users` (each
  // with its rules), the users and rules a cluster keeps in etcd. Only what differs is written:
  // one synced WriteBatch of puts and deletes, then the in-memory copy is swapped under mu_, so
  // a concurrent check sees the old set or the new one, never a mix. Returns how many users
  // were added, changed (secret, type, enabled or rules) or removed. Entries are not validated
  // again (the cluster's writers validated them). Errors: RocksDB's, the store unchanged.
  struct UserWithRules {
    User user;
    std::vector<AclRule> rules;
  };
  absl::StatusOr<int> ReplaceAll(const std::vector<UserWithRules>& users);

  // The decision for one action on one resource: false for an unknown or disabled user, true
  // for an enabled super user, else RulesAllow over the user's rules.
  bool Allows(const std::string& access_key, const Resource& resource, Action action) const;

 private:
  explicit AuthStore(rocksdb::DB* db) : db_(db) {}

  struct Entry {
    User user;
    std::vector<AclRule> rules;  // sorted by resource text
  };

  rocksdb::DB* db_;
  mutable std::mutex mu_;  // serialises writes and guards users_
  std::map<std::string, Entry> users_;
};

}  // namespace tokimq::broker::auth
