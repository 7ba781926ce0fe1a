//! What the store's tests use and the service does not: a scan page with its
//! rows copied out. Shared by the unit tests and `tests/postgres/` (which
//! includes this file), so it names everything through its parent module.

use super::{EntityKey, ScanRequest, Store, StoreError};

/// One page of a scan, its rows copied out.
pub(crate) struct ScanPage {
    pub(crate) rows: Vec<(EntityKey, Vec<u8>)>,
    /// As `ScanEnd::next`: where the next page starts.
    pub(crate) next: Option<EntityKey>,
}

/// [`Store::scan_into`] collecting owned copies of the rows.
#[async_trait::async_trait]
pub(crate) trait ScanEntities: Store {
    async fn scan_entities(&self, account: &str, table: &str, request: ScanRequest) -> Result<ScanPage, StoreError> {
        let mut rows = Vec::new();
        let end = self.scan_into(account, table, request, &mut rows).await?;
        Ok(ScanPage { rows, next: end.next })
    }
}

impl<S: Store + ?Sized> ScanEntities for S {}
