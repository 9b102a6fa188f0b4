# AUTH and NOAUTH with --requirepass; HELLO 3 switching to RESP3.
start_server {args {--requirepass s3cret}} {
    test "commands before AUTH get NOAUTH" {
        set c [new_client]
        assert_error "NOAUTH*" {$c get k}
        assert_error "NOAUTH*" {$c set k v}
        assert_error "WRONGPASS*" {$c auth wrong}
        assert_error "NOAUTH*" {$c ping}
        assert_equal OK [$c auth s3cret]
        assert_equal PONG [$c ping]
        assert_equal OK [$c set auth:k v]
        $c close
    }

    test "HELLO 3 AUTH default password" {
        set c [new_client]
        set h [$c hello 3 AUTH default s3cret]
        assert_equal 3 [dict get $h proto]
        assert_equal v [$c get auth:k]
        $c close
    }
}

start_server {} {
    test "HELLO 3 replies a map and switches to RESP3" {
        set c [new_client]
        set h [$c typed hello 3]
        assert_equal map [lindex $h 0]
        set d [resp::plain $h]
        assert_equal 3 [dict get $d proto]
        assert_equal {nil {}} [$c typed get resp3:missing]
        $c set resp3:k v
        assert_equal {bulk v} [$c typed get resp3:k]
        assert_match {array *} [$c typed hello 2]
        assert_equal {nil {}} [$c typed get resp3:missing]
        $c close
    }

    test "AUTH without a password configured is an error" {
        assert_error "ERR*" {r auth foo}
    }
}
