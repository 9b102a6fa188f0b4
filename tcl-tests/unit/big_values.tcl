# A 100 MiB value round trip: one SET, one GET, compared by length and CRC.
start_server {} {
    test "100 MiB value round trip is byte-identical" {
        set chunk ""
        for {set i 0} {$i < 65537} {incr i} {
            append chunk [binary format c [expr {($i * 7 + ($i >> 8)) & 255}]]
        }
        # A period of 65537 bytes lines up with no power-of-two buffer size.
        set n [expr {100 * 1024 * 1024}]
        set v [binary format a$n [string repeat $chunk [expr {$n / 65537 + 1}]]]
        set crc [zlib crc32 $v]
        set c [new_client [scaled_ms 60000]]
        assert_equal OK [$c set big:100m $v]
        unset v
        assert_equal $n [$c strlen big:100m]
        set got [$c get big:100m]
        assert_equal $n [string length $got]
        assert_equal $crc [zlib crc32 $got] "(CRC of the value read back)"
        unset got
        assert_equal 1 [$c del big:100m]
        $c close
    }
}
