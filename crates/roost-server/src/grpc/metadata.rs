//! Who a call is from: the bearer token and run id in its metadata, checked as REST checks
//! the same headers (`rest/extract.rs`), then the caller's rate limit and idempotency key.

use tonic::metadata::MetadataMap;
use tonic::Request;

use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// Metadata carrying the run a call is made for (see `control.proto`).
const RUN_ID_METADATA: &str = "x-roost-run-id";

/// Resolves the caller from `authorization` and `x-roost-run-id`, as REST does from headers.
pub(super) async fn authenticate_request<T>(
    api: &Api,
    request: &Request<T>,
) -> Result<Caller, ApiError> {
    let credentials = Credentials::from_metadata(request.metadata())?;
    let mut caller = api
        .authenticate(credentials.token.as_deref(), credentials.run_id.as_deref())
        .await?;
    api.rate_limit(&caller)?;
    if let Some(v) = request.metadata().get("idempotency-key") {
        caller.idempotency_key = Some(crate::auth::idempotency_key(
            v.as_bytes(),
            "the idempotency-key metadata",
        )?);
    }
    Ok(caller)
}

/// The bearer token and run id found in a call's metadata, not yet checked against state.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Credentials {
    pub(super) token: Option<String>,
    pub(super) run_id: Option<String>,
}

impl Credentials {
    pub(super) fn from_metadata(metadata: &MetadataMap) -> Result<Credentials, ApiError> {
        let token = match metadata.get("authorization") {
            None => None,
            Some(value) => {
                let text = value
                    .to_str()
                    .map_err(|_| ApiError::unauthorized("malformed authorization metadata"))?;
                let token = text
                    .strip_prefix("Bearer ")
                    .or_else(|| text.strip_prefix("bearer "))
                    .ok_or_else(|| {
                        ApiError::unauthorized("authorization must be `Bearer <token>`")
                    })?;
                Some(token.trim().to_string())
            }
        };
        let run_id = match metadata.get(RUN_ID_METADATA) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| {
                        ApiError::bad_request(format!("malformed {RUN_ID_METADATA} metadata"))
                    })?
                    .to_string(),
            ),
        };
        Ok(Credentials { token, run_id })
    }
}

#[cfg(test)]
mod tests {
    use tonic::metadata::MetadataValue;

    use tonic::Status;

    use super::*;

    fn metadata(pairs: &[(&'static str, &str)]) -> MetadataMap {
        let mut map = MetadataMap::new();
        for (key, value) in pairs {
            map.insert(*key, MetadataValue::try_from(*value).unwrap());
        }
        map
    }

    #[test]
    fn bearer_token_and_run_id_are_read_from_metadata() {
        let found = Credentials::from_metadata(&metadata(&[
            ("authorization", "Bearer  rst_agent_x "),
            ("x-roost-run-id", "r1"),
        ]))
        .unwrap();
        let expected = Credentials {
            token: Some("rst_agent_x".into()),
            run_id: Some("r1".into()),
        };
        assert_eq!(found, expected);
    }

    #[test]
    fn missing_metadata_is_left_for_authenticate_to_refuse() {
        let found = Credentials::from_metadata(&MetadataMap::new()).unwrap();
        assert_eq!(
            found,
            Credentials {
                token: None,
                run_id: None
            }
        );
    }

    #[test]
    fn a_non_bearer_authorization_is_unauthenticated() {
        let error =
            Credentials::from_metadata(&metadata(&[("authorization", "Basic abc")])).unwrap_err();
        assert_eq!(Status::from(error).code(), tonic::Code::Unauthenticated);
    }
}
