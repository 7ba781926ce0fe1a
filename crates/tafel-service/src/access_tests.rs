//! What each credential may do: SAS letters and resource types, key ranges, token roles.

use super::*;

const ALL: [Action; 13] = [
    Action::QueryTables,
    Action::CreateTable,
    Action::DeleteTable,
    Action::ReadEntity,
    Action::InsertEntity,
    Action::UpdateEntity,
    Action::UpsertEntity,
    Action::DeleteEntity,
    Action::GetTableAcl,
    Action::SetTableAcl,
    Action::GetServiceProperties,
    Action::SetServiceProperties,
    Action::GetServiceStats,
];

fn table_sas(sp: &str, range: Option<KeyRange>) -> Access {
    let permissions = TablePermissions::parse(sp).expect("valid letters");
    Access::Sas(Arc::new(SasGrant::Table(TableGrant {
        table: "Orders".into(),
        permissions,
        range,
    })))
}

fn account_sas(srt: &str, sp: &str) -> Access {
    Access::Sas(Arc::new(SasGrant::Account(AccountGrant {
        resource_types: ResourceTypes::parse(srt).expect("valid srt"),
        permissions: AccountPermissions::parse(sp).expect("valid sp"),
    })))
}

fn code(r: Result<()>) -> Option<ErrorCode> {
    r.err().map(|e| e.code)
}

#[test]
fn each_service_sas_letter_allows_exactly_its_operations() {
    let needs: [(Action, &str); 5] = [
        (Action::ReadEntity, "r"),
        (Action::InsertEntity, "a"),
        (Action::UpdateEntity, "u"),
        (Action::UpsertEntity, "au"),
        (Action::DeleteEntity, "d"),
    ];
    for sp in ["", "r", "a", "u", "d", "au", "raud"] {
        let access = table_sas(sp, None);
        for (action, need) in needs {
            let ok = need.chars().all(|c| sp.contains(c));
            let got = code(access.check(action, Some("orders"), Some(("p", "r"))));
            let want = if ok {
                None
            } else {
                Some(ErrorCode::AuthorizationPermissionMismatch)
            };
            assert_eq!(got, want, "sp={sp} {action:?}");
        }
    }
}

#[test]
fn service_sas_is_bound_to_its_table_and_to_entities() {
    let access = table_sas("raud", None);
    assert_eq!(code(access.check(Action::ReadEntity, Some("ORDERS"), None)), None);
    assert_eq!(
        code(access.check(Action::ReadEntity, Some("other"), None)),
        Some(ErrorCode::AuthorizationResourceTypeMismatch)
    );
    for action in ALL {
        if matches!(
            action,
            Action::ReadEntity
                | Action::InsertEntity
                | Action::UpdateEntity
                | Action::UpsertEntity
                | Action::DeleteEntity
        ) {
            continue;
        }
        assert_eq!(
            code(access.check(action, Some("orders"), None)),
            Some(ErrorCode::AuthorizationResourceTypeMismatch),
            "{action:?}"
        );
    }
}

#[test]
fn account_sas_mapping() {
    use ErrorCode::{AuthorizationPermissionMismatch as Perm, AuthorizationResourceTypeMismatch as Type};
    let cases: [(Action, &str, &str); 13] = [
        (Action::GetServiceProperties, "s", "r"),
        (Action::SetServiceProperties, "s", "w"),
        (Action::GetServiceStats, "s", "r"),
        (Action::QueryTables, "c", "l"),
        (Action::CreateTable, "c", "c"),
        (Action::DeleteTable, "c", "d"),
        (Action::GetTableAcl, "c", ""),
        (Action::SetTableAcl, "c", ""),
        (Action::ReadEntity, "o", "r"),
        (Action::InsertEntity, "o", "a"),
        (Action::UpdateEntity, "o", "u"),
        (Action::UpsertEntity, "o", "au"),
        (Action::DeleteEntity, "o", "d"),
    ];
    for (action, srt, sp) in cases {
        let full = account_sas("sco", "rwdlacup");
        let want = if sp.is_empty() { Some(Perm) } else { None };
        assert_eq!(code(full.check(action, Some("t"), None)), want, "{action:?}");
        let others: String = "sco".chars().filter(|c| !srt.contains(*c)).collect();
        assert_eq!(
            code(account_sas(&others, "rwdlacup").check(action, Some("t"), None)),
            Some(Type),
            "{action:?}"
        );
        if !sp.is_empty() {
            for letter in sp.chars() {
                let without: String = "rwdlacup".chars().filter(|c| *c != letter).collect();
                // Create Table also accepts `a` and `w`.
                if action == Action::CreateTable {
                    continue;
                }
                assert_eq!(
                    code(account_sas(srt, &without).check(action, Some("t"), None)),
                    Some(Perm),
                    "{action:?} without {letter}"
                );
            }
            assert_eq!(
                code(account_sas(srt, sp).check(action, Some("t"), None)),
                None,
                "{action:?}"
            );
        }
    }
    for sp in ["a", "c", "w"] {
        assert_eq!(
            code(account_sas("c", sp).check(Action::CreateTable, Some("t"), None)),
            None
        );
    }
    assert_eq!(
        code(account_sas("c", "rdlup").check(Action::CreateTable, Some("t"), None)),
        Some(Perm)
    );
}

#[test]
fn key_ranges_bound_writes_and_clip_reads() {
    let range = TableGrant::key_range(Some("b"), Some("2"), Some("d"), None)
        .expect("valid")
        .expect("bounded");
    let access = table_sas("raud", Some(range));
    let write = |pk, rk| code(access.check(Action::InsertEntity, Some("orders"), Some((pk, rk))));
    assert_eq!(write("b", "2"), None);
    assert_eq!(write("b", "3"), None);
    assert_eq!(write("c", ""), None);
    assert_eq!(write("d", "\u{FFFF}"), None);
    assert_eq!(write("b", "1"), Some(ErrorCode::AuthorizationPermissionMismatch));
    assert_eq!(write("a", "9"), Some(ErrorCode::AuthorizationPermissionMismatch));
    assert_eq!(write("da", ""), Some(ErrorCode::AuthorizationPermissionMismatch));
    // Reads by key are refused outside the range like writes; queries (no keys) pass.
    let read = |pk: &str, rk: &str| code(access.check(Action::ReadEntity, Some("orders"), Some((pk, rk))));
    assert_eq!(read("a", "1"), Some(ErrorCode::AuthorizationPermissionMismatch));
    assert_eq!(read("c", "x"), None);
    assert_eq!(code(access.check(Action::ReadEntity, Some("orders"), None)), None);

    let clipped = access.clip(vec![KeyRange::all()]);
    assert_eq!(clipped.len(), 1);
    assert!(clipped[0].contains(EntityKey::new("b", "2").as_bytes()));
    assert!(!clipped[0].contains(EntityKey::new("b", "1").as_bytes()));
    assert!(!clipped[0].contains(EntityKey::new("e", "").as_bytes()));
    let parts = access.clip(vec![
        KeyRange::partition("a"),
        KeyRange::partition("c"),
        KeyRange::partition("z"),
    ]);
    assert_eq!(parts, vec![KeyRange::partition("c")]);
    // A single-row range: spk=epk, srk=erk.
    let one = TableGrant::key_range(Some("p"), Some("r"), Some("p"), Some("r"))
        .expect("valid")
        .expect("bounded");
    assert!(one.contains(EntityKey::new("p", "r").as_bytes()));
    assert!(!one.contains(EntityKey::new("p", "r0").as_bytes()));
    assert!(!one.contains(EntityKey::new("p", "").as_bytes()));
    assert!(TableGrant::key_range(None, Some("r"), None, None).is_err());
    assert_eq!(TableGrant::key_range(None, None, None, None).ok(), Some(None));
}

#[test]
fn permission_letters() {
    assert_eq!(
        TablePermissions::parse("dura").map(|p| p.canonical()),
        Some("raud".to_owned())
    );
    assert_eq!(TablePermissions::parse("rw"), None);
    assert!(AccountPermissions::parse("rwdlacupx").is_some());
    assert!(AccountPermissions::parse("rz").is_none());
    assert!(ResourceTypes::parse("sco").is_some());
    assert!(ResourceTypes::parse("b").is_none());
}

#[test]
fn token_roles_grant_what_azures_built_in_roles_grant() {
    let reader = TokenGrant {
        account: Some(TableRole::Reader),
        tables: vec![("Orders".into(), TableRole::Contributor)],
    };
    let ok = |g: &TokenGrant, a, t| g.check(a, t).is_ok();
    assert!(ok(&reader, Action::QueryTables, None));
    assert!(ok(&reader, Action::ReadEntity, Some("other")));
    assert!(!ok(&reader, Action::InsertEntity, Some("other")));
    assert!(ok(&reader, Action::InsertEntity, Some("orders")));
    assert!(ok(&reader, Action::DeleteTable, Some("ORDERS")));
    assert!(!ok(&reader, Action::SetTableAcl, Some("orders")));
    let owner = TokenGrant::owner();
    for a in ALL {
        assert!(ok(&owner, a, Some("t")), "{a:?}");
    }
    let none = TokenGrant::default();
    let e = none.check(Action::ReadEntity, Some("t")).unwrap_err();
    assert_eq!(e.code, ErrorCode::AuthorizationPermissionMismatch);
    let table_only = TokenGrant {
        account: None,
        tables: vec![("t".into(), TableRole::Owner)],
    };
    assert!(!ok(&table_only, Action::QueryTables, None));
    assert!(ok(&table_only, Action::GetTableAcl, Some("t")));
}
