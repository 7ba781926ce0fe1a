//! `$batch` multipart/mixed codec.
