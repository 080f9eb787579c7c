// SPDX-License-Identifier: MIT
// SigV4 against the examples published in the AWS S3 documentation ("Signature Calculations for
// the Authorization Header" and "Query String Authentication"): key AKIAIOSFODNN7EXAMPLE,
// 20130524T000000Z, us-east-1, host examplebucket.s3.amazonaws.com.
#include <catch2/catch.hpp>

#include "remote/sigv4.h"

using namespace lazycache::remote;

namespace {
const AwsCredentials kCreds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr const char* kHost = "examplebucket.s3.amazonaws.com";
constexpr const char* kDate = "20130524T000000Z";

std::string signature_of(const std::string& auth) { return auth.substr(auth.find("Signature=") + 10); }
}  // namespace

TEST_CASE("sigv4: GET object with a range (AWS example)", "[unit][sigv4]") {
  SignRequest r{"GET",
                "/test.txt",
                {},
                {{"Host", kHost}, {"Range", "bytes=0-9"}, {"x-amz-content-sha256", std::string(kEmptyPayloadHash)}, {"x-amz-date", kDate}},
                std::string(kEmptyPayloadHash),
                kDate,
                "us-east-1"};
  std::string auth = authorization_header(r, kCreds);
  CHECK(signature_of(auth) == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  CHECK(auth.find("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,") != std::string::npos);
  CHECK(auth.find("Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request") != std::string::npos);
}

TEST_CASE("sigv4: PUT object with a signed payload (AWS example)", "[unit][sigv4]") {
  std::string body = "Welcome to Amazon S3.";
  std::string hash = sha256_hex(body);
  CHECK(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SignRequest r{"PUT",
                "/" + uri_encode("test$file.text", false),
                {},
                {{"Host", kHost},
                 {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                 {"x-amz-date", kDate},
                 {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                 {"x-amz-content-sha256", hash}},
                hash,
                kDate,
                "us-east-1"};
  CHECK(signature_of(authorization_header(r, kCreds)) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST_CASE("sigv4: GET bucket lifecycle, a value-less query parameter (AWS example)", "[unit][sigv4]") {
  SignRequest r{"GET",
                "/",
                {{"lifecycle", ""}},
                {{"Host", kHost}, {"x-amz-date", kDate}, {"x-amz-content-sha256", std::string(kEmptyPayloadHash)}},
                std::string(kEmptyPayloadHash),
                kDate,
                "us-east-1"};
  CHECK(signature_of(authorization_header(r, kCreds)) == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST_CASE("sigv4: list objects, query sorted by name (AWS example)", "[unit][sigv4]") {
  SignRequest r{"GET",
                "/",
                {{"prefix", "J"}, {"max-keys", "2"}},
                {{"Host", kHost}, {"x-amz-date", kDate}, {"x-amz-content-sha256", std::string(kEmptyPayloadHash)}},
                std::string(kEmptyPayloadHash),
                kDate,
                "us-east-1"};
  CHECK(canonical_query(r.query) == "max-keys=2&prefix=J");
  CHECK(signature_of(authorization_header(r, kCreds)) == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST_CASE("sigv4: presigned GET (AWS example)", "[unit][sigv4]") {
  SignRequest r{"GET", "/test.txt", {}, {{"Host", kHost}}, "", kDate, "us-east-1"};
  std::string q = presign_query(r, kCreds, 86400);
  CHECK(q.find("X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") != std::string::npos);
  CHECK(q.find("X-Amz-SignedHeaders=host") != std::string::npos);
}

TEST_CASE("sigv4: a different secret changes the signature", "[unit][sigv4]") {
  SignRequest r{"GET", "/test.txt", {}, {{"Host", kHost}, {"x-amz-date", kDate}}, std::string(kUnsignedPayload), kDate, "us-east-1"};
  AwsCredentials other = kCreds;
  other.secret_access_key.back() = 'X';
  CHECK(authorization_header(r, kCreds) != authorization_header(r, other));
}

TEST_CASE("sigv4: encoding of keys and headers", "[unit][sigv4]") {
  CHECK(uri_encode("a b+c/d~e", false) == "a%20b%2Bc/d~e");
  CHECK(uri_encode("a/b", true) == "a%2Fb");
  CHECK(uri_encode("\xc3\xbc", true) == "%C3%BC");
  CHECK(amz_date(1369353600) == "20130524T000000Z");
  SignRequest r{"GET", "/", {}, {{"X-Amz-Meta-A", "  a   b  "}, {"Host", "h"}}, "x", kDate, "us-east-1"};
  std::string names;
  std::string canonical = canonical_request(r, &names);
  CHECK(names == "host;x-amz-meta-a");
  CHECK(canonical.find("x-amz-meta-a:a b\n") != std::string::npos);
}
